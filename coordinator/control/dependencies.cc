#include "coordinator/control/dependencies.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "coordinator/state/job_state_machine.h"
#include "spec/dependency_spec.h"

namespace convoy {

namespace {

// The entry of `job`'s waiting_for naming `dependency`; null when none does.
const v1::JobDependency* EntryFor(const v1::Job& job, const std::string& dependency) {
  for (const v1::JobDependency& d : job.waiting_for()) {
    if (d.job_id() == dependency) return &d;
  }
  return nullptr;
}

}  // namespace

Status Dependencies::CheckAtSubmit(const v1::JobSpec& spec, const std::string& next_id) const {
  std::vector<std::string> named;
  for (int i = 0; i < spec.after_size(); ++i) {
    const std::string& id = spec.after(i).job_id();
    const std::string field = "after[" + std::to_string(i) + "].job";
    if (table_.Find(id) != nullptr) {
      named.push_back(id);
      continue;
    }
    if (id == next_id) {
      return Status::InvalidArgument(field + ": " + id +
                                     " is the id this job would get; a job cannot wait for "
                                     "itself (that would make a cycle)");
    }
    if (!JobIdLess()(id, next_id)) {
      return Status::InvalidArgument(
          field + ": no job " + id + " yet (the next id is " + next_id +
          "); a job waits only for jobs submitted before it, so that no cycle can be made");
    }
    return Status::InvalidArgument(field + ": no job " + id +
                                   " (never submitted to this cluster, or deleted)");
  }
  if (auto cycle = graph_.CycleThrough(next_id, named)) {
    return Status::InvalidArgument("after: would make a cycle: " + *cycle);
  }
  return Status::Ok();
}

std::string Dependencies::Prepare(v1::Job& job) const {
  job.clear_waiting_for();
  std::vector<v1::JobDependency> unmet;
  for (const v1::JobDependency& d : job.spec().after()) {
    const JobRecord* dep = table_.Find(d.job_id());
    if (dep == nullptr) return DeletedReason(d);
    switch (Judge(ConditionOf(d), dep->job.state())) {
      case DependencyVerdict::kMet:
        break;
      case DependencyVerdict::kNever:
        return NeverReason(d, dep->job.state());
      case DependencyVerdict::kWaiting:
        unmet.push_back(d);
        unmet.back().set_when(ConditionOf(d));
        break;
    }
  }
  for (v1::JobDependency& d : unmet) *job.add_waiting_for() = std::move(d);
  job.set_pending_reason(WaitingReason({job.waiting_for().begin(), job.waiting_for().end()}));
  return "";
}

void Dependencies::Track(JobRecord& r, const std::string& never) {
  if (!never.empty()) {
    Fail(r.job.id(), never);
    return;
  }
  for (const v1::JobDependency& d : r.job.waiting_for()) graph_.Add(r.job.id(), d.job_id());
}

void Dependencies::Fail(const std::string& id, const std::string& reason) {
  JobRecord* r = table_.Find(id);
  graph_.DropWaits(id);
  if (r == nullptr || IsTerminal(r->job.state())) return;
  r->job.clear_waiting_for();
  r->job.clear_pending_reason();
  Status st = writer_.Transition(*r, v1::FAILED, reason);
  if (!st.ok()) {
    // Never placed meanwhile; a restart judges it again (Recover).
    doomed_[id] = reason;
    spdlog::error("job {}: cannot fail it ({}); it stays unplaced: {}", id, reason, st.message());
  }
}

void Dependencies::Refresh(JobRecord& r) {
  const DependencyGraph::IdSet& unmet = graph_.WaitsFor(r.job.id());
  std::vector<v1::JobDependency> keep;
  for (const v1::JobDependency& d : r.job.waiting_for()) {
    if (unmet.count(d.job_id()) != 0) keep.push_back(d);
  }
  r.job.clear_waiting_for();
  for (const v1::JobDependency& d : keep) *r.job.add_waiting_for() = d;
  r.job.set_pending_reason(WaitingReason(keep));
}

void Dependencies::OnEnded(const std::string& id) {
  // A worklist, not recursion: failing a dependant ends it, which lands here again.
  ended_.push_back(id);
  if (draining_) return;
  draining_ = true;
  while (!ended_.empty()) {
    const std::string next = std::move(ended_.front());
    ended_.pop_front();
    Resolve(next);
  }
  draining_ = false;
}

void Dependencies::Resolve(const std::string& id) {
  doomed_.erase(id);
  JobRecord* ended = table_.Find(id);
  if (ended != nullptr && graph_.Waits(id)) {  // it ended while waiting (cancelled)
    graph_.DropWaits(id);
    ended->job.clear_waiting_for();
    ended->job.clear_pending_reason();
    writer_.MarkChanged(*ended);
  }
  if (ended == nullptr) return;
  const v1::JobState state = ended->job.state();
  const DependencyGraph::IdSet& waiting = graph_.Dependants(id);
  const std::vector<std::string> waiters(waiting.begin(), waiting.end());
  for (const std::string& w : waiters) {
    graph_.Remove(w, id);
    JobRecord* r = table_.Find(w);
    if (r == nullptr || IsTerminal(r->job.state())) continue;
    const v1::JobDependency* entry = EntryFor(r->job, id);
    if (entry == nullptr) continue;
    const v1::JobDependency d = *entry;
    if (Judge(ConditionOf(d), state) == DependencyVerdict::kNever) {
      Fail(w, NeverReason(d, state));
      continue;
    }
    Refresh(*r);
    if (graph_.Waits(w)) {
      writer_.MarkChanged(*r);
      continue;
    }
    // The last one: written with an event, so that a restart does not wait again.
    (void)writer_.Note(*r, "dependencies met (" + id + " " + v1::JobState_Name(state) +
                               "); it waits to be scheduled like any other job");
    on_unblocked_(w);
  }
  graph_.Erase(id);
}

void Dependencies::OnDeleted(const std::string& id) {
  const DependencyGraph::IdSet& waiting = graph_.Dependants(id);
  const std::vector<std::string> waiters(waiting.begin(), waiting.end());
  for (const std::string& w : waiters) {
    graph_.Remove(w, id);
    const JobRecord* r = table_.Find(w);
    const v1::JobDependency* entry = r == nullptr ? nullptr : EntryFor(r->job, id);
    if (entry != nullptr) Fail(w, DeletedReason(*entry));
  }
  graph_.Erase(id);
}

void Dependencies::Recover() {
  std::vector<std::pair<std::string, std::string>> fail;
  for (const std::string& id : table_.active()) {
    JobRecord& r = table_.at(id);
    if (r.job.state() != v1::PENDING || r.job.waiting_for_size() == 0) continue;
    std::string never;
    for (const v1::JobDependency& d : r.job.waiting_for()) {
      const JobRecord* dep = table_.Find(d.job_id());
      if (dep == nullptr) {
        never = DeletedReason(d);
        break;
      }
      const DependencyVerdict verdict = Judge(ConditionOf(d), dep->job.state());
      if (verdict == DependencyVerdict::kNever) {
        never = NeverReason(d, dep->job.state());
        break;
      }
      if (verdict == DependencyVerdict::kWaiting) graph_.Add(id, d.job_id());
    }
    if (!never.empty()) {
      fail.emplace_back(id, std::move(never));
      continue;
    }
    const int before = r.job.waiting_for_size();
    Refresh(r);
    if (r.job.waiting_for_size() != before) writer_.MarkChanged(r);  // met while we were down
  }
  // After the whole graph is built, so that each failure judges its own dependants.
  for (const auto& [id, why] : fail) Fail(id, why);
  if (graph_.waiting_jobs() > 0) {
    spdlog::info("{} job(s) wait for other jobs (after)", graph_.waiting_jobs());
  }
}

std::vector<std::string> Dependencies::UnfinishedDependants(
    const std::string& id, const std::function<bool(const JobRecord&)>& follow) const {
  return graph_.TransitiveDependants(id, [&](const std::string& d) {
    const JobRecord* r = table_.Find(d);
    return r != nullptr && !IsTerminal(r->job.state()) && (!follow || follow(*r));
  });
}

std::string Dependencies::CancelDependants(const JobRecord& root, const std::string& why) {
  const std::string owner = root.job.owner();
  const std::string root_id = root.job.id();
  std::string named;
  int cancelled = 0;
  for (const std::string& id : UnfinishedDependants(
           root_id, [&owner](const JobRecord& r) { return r.job.owner() == owner; })) {
    JobRecord& r = table_.at(id);
    if (IsTerminal(r.job.state())) continue;
    if (!writer_.Transition(r, v1::CANCELLED, why + " (cascade from " + root_id + ")").ok())
      continue;
    if (++cancelled <= kMaxNamed) named += (named.empty() ? "" : ", ") + id;
  }
  if (cancelled > kMaxNamed) named += " and " + std::to_string(cancelled - kMaxNamed) + " more";
  return named;
}

}  // namespace convoy

// JobManager: the client API, transitions, placement and teardown.
// Worker events and timeouts are in job_manager_workers.cc.
#include "coordinator/job_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "common/job_spec_validation.h"
#include "common/util.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/rendezvous_planner.h"
#include "coordinator/scheduler.h"

namespace convoy {

JobManager::JobManager(const Clock& clock, JobStore& store, WorkerRegistry& workers,
                       WorkerChannel& channel, JobManagerOptions options)
    : clock_(clock),
      store_(store),
      workers_(workers),
      channel_(channel),
      options_(options),
      scheduler_(options.scheduler != nullptr ? *options.scheduler : default_scheduler_),
      table_(clock),
      stats_(clock),
      logs_(clock, options.log_request_timeout_ms),
      deletions_(clock, store, channel, options.cluster_id),
      retention_(clock, options.job_retention_ms, options.job_retention_count) {}

AttemptRuntime JobManager::NewRuntime() const {
  return AttemptRuntime(FailureAttribution(clock_, options_.failure_window_ms));
}

JobRecord* JobManager::FindAttemptOf(const std::string& id, const std::string& uid) {
  JobRecord* r = table_.Find(id);
  return r != nullptr && SameUid(uid, r->job.uid()) ? r : nullptr;
}

v1::Attempt* JobManager::CurrentAttempt(JobRecord& r) {
  if (r.job.attempts_size() == 0) return nullptr;
  v1::Attempt* last = r.job.mutable_attempts(r.job.attempts_size() - 1);
  return last->attempt() == r.rt.attempt ? last : nullptr;
}

namespace {

// "0-3", "0-3, 8-11", "5": sorted ranks as ranges.
std::string RankRanges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] <= ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]) +
           (ranks[j] != ranks[i] ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

// The metric history's bound per rank for a job of this shape.
int HistoryPoints(const v1::JobSpec& spec) {
  const int64_t per_node = spec.procs_per_node_gpu() ? 8 : std::max(1, spec.procs_per_node());
  return MetricHistory::PointsPerRank(int64_t{std::max(1, MaxNodes(spec))} * per_node);
}

}  // namespace

void JobManager::ReleaseIdentityOf(const std::string& job_uid) {
  if (!deletions_.HoldsFilesOf(job_uid)) identities_.Release(job_uid);
}

Status JobManager::Recover() {
  auto workers = store_.LoadWorkers();
  if (!workers.ok()) return workers.status();
  for (const v1::WorkerInfo& w : *workers) workers_.Restore(w);

  auto jobs = store_.LoadJobs();
  if (!jobs.ok()) return jobs.status();
  const int64_t now = clock_.NowMonotonicMs();
  for (v1::Job& job : *jobs) {
    if (job.identity() > 0) identities_.Hold(job.identity(), job.uid());
    const std::string id = job.id();
    table_.Insert(std::move(job), NewRuntime());
    if (table_.waiting().count(id) > 0) schedule_needed_ = true;
  }
  for (auto& [id, r] : table_.records()) {
    if (r.job.uid().empty() || r.job.identity() <= 0) {
      // Stored by a coordinator older than job uids or identities: it gets them now, kept
      // from here on.
      if (r.job.uid().empty()) r.job.set_uid(RandomHexId());
      if (r.job.identity() <= 0) r.job.set_identity(identities_.Take(r.job.uid()));
      v1::Job copy = r.job;
      copy.clear_events();
      Status st = store_.SaveJob(copy, nullptr);
      if (!st.ok()) return st;
    }
    r.metrics.Rebuild(r.job);
    r.history = MetricHistory(r.job.id(), HistoryPoints(r.job.spec()));
    r.rt.released = true;
    if (!HoldsWorkers(r.job.state()) || r.job.attempts_size() == 0) continue;
    AttemptRuntime rt = NewRuntime();
    const v1::Attempt& a = r.job.attempts(r.job.attempts_size() - 1);
    rt.attempt = a.attempt();
    rt.released = false;
    rt.recovering = true;
    rt.launched = a.master_port() != 0;
    rt.tearing_down = r.job.state() == v1::RESTARTING;
    rt.deadline_mono_ms = now + workers_.worker_timeout_ms() + options_.rendezvous_timeout_ms;
    rt.failures.SetRendezvousDeadline(rt.deadline_mono_ms);
    for (const v1::NodeAssignment& n : a.nodes()) {
      for (int i = 0; i < n.ranks_size(); ++i) {
        RankRuntime& rr = rt.ranks[n.ranks(i)];
        rr.worker = n.worker();
        rr.local_rank = i;
        rr.started = r.job.state() == v1::RUNNING;
        rr.last_progress_mono_ms = now;
        if (i < n.resources_size()) rr.resources = n.resources(i);
      }
    }
    for (const v1::ProcessExited& e : a.exits()) {
      auto it = rt.ranks.find(e.rank());
      if (it != rt.ranks.end()) it->second.gone = true;
    }
    for (const auto& [rank, rr] : rt.ranks) {
      if (!rr.gone) rt.awaiting.insert(rr.worker);
    }
    Attach(r, std::move(rt));
    spdlog::info("recovered job {} in {} (attempt {}); waiting for its workers", r.job.id(),
                 StateName(r.job.state()), r.rt.attempt);
  }
  auto histories = store_.LoadJobMetrics();
  if (!histories.ok()) return histories.status();
  for (v1::JobMetrics& m : *histories) {
    JobRecord* r = table_.Find(m.job_id());
    if (r != nullptr) r->history.Restore(std::move(m));
  }
  auto deletions = store_.LoadFileDeletions();
  if (!deletions.ok()) return deletions.status();
  deletions_.Restore(*deletions);
  spdlog::info("recovered {} jobs and {} workers from the store", table_.size(), workers->size());
  return Status::Ok();
}

StatusOr<std::string> JobManager::Submit(const v1::JobSpec& spec, const std::string& owner,
                                         const std::string& role) {
  CONVOY_RETURN_IF_ERROR(ValidateJobSpec(spec));
  // resume_from naming a job: a finished job of the same owner, fixed now by its uid (its id
  // may name another job after a restore; its uid never does).
  std::optional<v1::ResumeSource> resume;
  if (IsJobIdLike(spec.resume_from())) {
    const JobRecord* from = table_.Find(spec.resume_from());
    if (from == nullptr) {
      return Status::InvalidArgument("resume_from: no job " + spec.resume_from() +
                                     " (a finished job of yours, or a path under the job's "
                                     "directory)");
    }
    if (from->job.owner() != owner) {
      return Status::PermissionDenied(
          "resume_from: job " + spec.resume_from() + " belongs to " +
          (from->job.owner().empty() ? std::string("nobody") : from->job.owner()) +
          "; a job resumes only from its owner's jobs");
    }
    if (!IsTerminal(from->job.state())) {
      return Status::FailedPrecondition("resume_from: job " + spec.resume_from() + " is " +
                                        StateName(from->job.state()) +
                                        "; resume from it when it has finished");
    }
    resume.emplace();
    resume->set_job_id(from->job.id());
    resume->set_uid(from->job.uid());
    resume->set_checkpoint_dir(from->job.spec().checkpoint_dir());
  }
  v1::Job probe;
  probe.set_owner(owner);
  probe.set_owner_role(role);
  const Quota quota = QuotaOf(probe);
  if (quota.queued > 0 && !owner.empty()) {
    int queued = 0;
    for (const std::string& id : table_.waiting())
      queued += table_.at(id).job.owner() == owner ? 1 : 0;
    if (queued >= quota.queued) {
      return Status::ResourceExhausted("quota: " + owner + " has " + std::to_string(queued) +
                                       " jobs waiting, the most " + "a user may (" +
                                       quota.queued_source + " " + std::to_string(quota.queued) +
                                       "); submit again when one has started");
    }
  }
  if ((quota.slots > 0 || quota.gpus > 0) && !owner.empty()) {
    // The least this job holds when it runs (a GPU job's size depends on its workers).
    const int procs = spec.procs_per_node_gpu() ? 1 : spec.procs_per_node();
    const int64_t slots = int64_t{MinNodes(spec)} * procs;
    const int64_t gpus = slots * GpusPerProc(spec);
    int64_t used_slots = 0, used_gpus = 0;
    for (const std::string& id : table_.attached()) {
      const JobRecord& other = table_.at(id);
      if (other.job.owner() != owner || other.rt.tearing_down) continue;
      for (const NodeHold& h : Holds(other)) {
        used_slots += h.slots;
        used_gpus += h.gpus;
      }
    }
    auto refuse = [&](const std::string& what, int64_t used, int64_t limit, int64_t need,
                      const std::string& source) {
      return Status::ResourceExhausted(
          "quota: " + owner + "'s running jobs use " + std::to_string(used) + " of " +
          std::to_string(limit) + " " + what + " (" + source + ") and this job needs " +
          std::to_string(need) +
          (need > limit ? "; it can never start: ask for fewer"
                        : "; submit again when they end (this coordinator refuses jobs over "
                          "quota: --over-quota refuse)"));
    };
    if (quota.slots > 0 && slots > quota.slots) {
      return refuse("processes", used_slots, quota.slots, slots, quota.source);
    }
    if (quota.gpus > 0 && gpus > quota.gpus) {
      return refuse("GPUs", used_gpus, quota.gpus, gpus, quota.gpus_source);
    }
    if (options_.refuse_over_quota) {
      if (quota.slots > 0 && used_slots + slots > quota.slots) {
        return refuse("processes", used_slots, quota.slots, slots, quota.source);
      }
      if (quota.gpus > 0 && used_gpus + gpus > quota.gpus) {
        return refuse("GPUs", used_gpus, quota.gpus, gpus, quota.gpus_source);
      }
    }
  }
  const std::string id = table_.NextId();
  v1::Job job;
  job.set_id(id);
  job.set_uid(RandomHexId());
  job.set_identity(identities_.Take(job.uid()));
  *job.mutable_spec() = spec;
  job.set_state(v1::PENDING);
  job.set_created_unix_ms(clock_.NowUnixMs());
  job.set_updated_unix_ms(job.created_unix_ms());
  job.set_owner(owner);
  job.set_owner_role(role);
  std::string submitted = owner.empty() ? "submitted" : "submitted by " + owner;
  if (resume) {
    *job.mutable_resume_source() = *resume;
    submitted += "; starts from the newest checkpoint of job " + resume->job_id() + " (uid " +
                 resume->uid() + ")";
  } else if (!spec.resume_from().empty()) {
    submitted += "; starts from " + spec.resume_from() + " (resume_from)";
  }
  job.set_message(submitted);
  v1::JobEvent event;
  event.set_time_unix_ms(job.created_unix_ms());
  event.set_to(v1::PENDING);
  event.set_reason(submitted);
  Status st = store_.SaveJob(job, &event);
  if (!st.ok()) return Status::Unavailable("cannot persist the job: " + st.message());
  *job.add_events() = event;
  JobRecord& r = table_.Insert(std::move(job), NewRuntime());
  r.history = MetricHistory(id, HistoryPoints(spec));
  spdlog::info("job {} ({}) submitted: {} node(s)", id, spec.name(),
               IsElastic(spec)
                   ? std::to_string(spec.min_nodes()) + "-" + std::to_string(spec.max_nodes())
                   : std::to_string(spec.nodes()));
  TrySchedule();
  return std::string(id);
}

StatusOr<v1::JobMetrics> JobManager::GetMetrics(const std::string& id) const {
  const JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  return r->history.Sorted();
}

StatusOr<v1::Job> JobManager::Get(const std::string& id) const {
  const JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  return r->job;
}

std::vector<v1::Job> JobManager::List(bool full) const {
  std::vector<v1::Job> out;
  out.reserve(table_.size());
  for (const auto& [id, r] : table_.records()) out.push_back(full ? r.job : Summary(r.job));
  return out;
}

JobManager::JobPage JobManager::ListPage(const JobQuery& query) const {
  JobPage page;
  const JobTable::Records& jobs = table_.records();
  auto it = query.after.empty() ? jobs.begin() : jobs.upper_bound(query.after);
  for (; it != jobs.end(); ++it) {
    if (!query.Matches(it->second.job)) continue;
    if (page.jobs.size() == static_cast<size_t>(query.limit)) {
      // Another match follows: the page is not the last.
      page.next_page_token = JobPageToken(page.jobs.back().id());
      break;
    }
    page.jobs.push_back(query.full ? it->second.job : Summary(it->second.job));
  }
  return page;
}

std::set<std::string> JobManager::ReferencedCode() const {
  std::set<std::string> out;
  for (const auto& [id, r] : table_.records()) {
    if (!r.job.spec().code_sha256().empty()) out.insert(r.job.spec().code_sha256());
  }
  return out;
}

std::vector<v1::Job> JobManager::ListActive() const {
  std::vector<v1::Job> out;
  for (const std::string& id : table_.active()) out.push_back(Summary(table_.at(id).job));
  return out;
}

v1::Job JobManager::Summary(const v1::Job& job) {
  v1::Job s;
  s.set_id(job.id());
  *s.mutable_spec() = job.spec();
  s.set_state(job.state());
  s.set_created_unix_ms(job.created_unix_ms());
  s.set_updated_unix_ms(job.updated_unix_ms());
  s.set_attempt(job.attempt());
  s.set_restarts(job.restarts());
  *s.mutable_latest() = job.latest();
  s.set_message(job.message());
  s.set_owner(job.owner());
  s.set_pending_reason(job.pending_reason());
  s.set_queue_position(job.queue_position());
  s.set_estimated_start_unix_ms(job.estimated_start_unix_ms());
  s.set_preemptions(job.preemptions());
  s.set_owner_role(job.owner_role());
  for (const v1::Attempt& a : job.attempts()) {
    v1::Attempt* t = s.add_attempts();
    t->set_attempt(a.attempt());
    t->set_master_addr(a.master_addr());
    t->set_master_port(a.master_port());
    t->set_started_unix_ms(a.started_unix_ms());
    t->set_ended_unix_ms(a.ended_unix_ms());
    if (a.has_failure()) *t->mutable_failure() = a.failure();
    t->set_node_count(a.nodes_size());
    t->set_exit_count(a.exits_size());
  }
  return s;
}

JobManager::Stats JobManager::GetStats() const {
  Stats st;
  st.jobs = table_.by_state();
  st.workers = workers_.counts();
  st.slots_total = workers_.ready_slots();
  st.slots_used = ledger_.used_slots();
  st.jobs_by_owner = table_.by_owner();
  st.attempts_started = stats_.attempts_started();
  st.attempt_failures = stats_.attempt_failures();
  st.restarts = stats_.restarts();
  st.preemptions = stats_.preemptions();
  return st;
}

std::vector<v1::Job> JobManager::TakeFinished() {
  std::vector<v1::Job> out;
  for (const std::string& id : stats_.TakeFinished()) {
    if (const JobRecord* r = table_.Find(id)) out.push_back(Summary(r->job));
  }
  return out;
}

void JobManager::Track(const std::string& id, v1::JobState from, v1::JobState to) {
  table_.SetState(id, from, to);
  if (IsTerminal(to)) stats_.Finished(id);
  if (to == v1::PENDING || to == v1::RESTARTING) schedule_needed_ = true;
}

void JobManager::Attach(JobRecord& r, AttemptRuntime rt) {
  for (const auto& [rank, rr] : rt.ranks) {
    if (!rr.gone) ledger_.Take(rr.worker, rr.resources);
  }
  table_.Attach(r, std::move(rt));
}

void JobManager::Detach(JobRecord& r) {
  for (const auto& [rank, rr] : r.rt.ranks) {
    if (!rr.gone) ledger_.Give(rr.worker, rr.resources);
  }
  table_.Detach(r);
  schedule_needed_ = true;
}

void JobManager::MarkStarted(AttemptRuntime& rt, RankRuntime& rr) {
  if (rr.started) return;
  rr.started = true;
  ++rt.started_count;
  if (rt.started_count == rt.ranks.size()) stats_.Observe(Phase::kRendezvous, rt.placed_mono_ms);
}

void JobManager::MarkGone(AttemptRuntime& rt, RankRuntime& rr) {
  if (rr.gone) return;
  rr.gone = true;
  ++rt.gone_count;
  ledger_.Give(rr.worker, rr.resources);
}

StatusOr<v1::Job> JobManager::Cancel(const std::string& id, const std::string& reason,
                                     const std::string& by) {
  JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  if (IsTerminal(r->job.state())) {
    return Status::FailedPrecondition("job " + id + " already " + StateName(r->job.state()));
  }
  const std::string who = by.empty() ? "cancelled by user" : "cancelled by " + by;
  const std::string why = reason.empty() ? who : who + ": " + reason;
  CONVOY_RETURN_IF_ERROR(Transition(*r, v1::CANCELLED, why));
  if (r->rt.attempt >= 0 && !r->rt.released) SendKill(*r, why);
  MaybeFinishTeardown(*r);
  return r->job;
}

StatusOr<uint64_t> JobManager::Watch(const std::string& id, WatchFn fn) {
  JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  v1::WatchJobResponse snapshot;
  *snapshot.mutable_job() = r->job;
  const bool done = IsTerminal(r->job.state());
  fn(snapshot, done);
  return done ? watches_.NextId() : watches_.Add(id, std::move(fn));
}

void JobManager::Unwatch(uint64_t watch_id) { watches_.Remove(watch_id); }

StatusOr<int> JobManager::RequestLogs(const std::string& id, int rank, int attempt, int64_t offset,
                                      int max_bytes, int wait_ms, LogFn fn) {
  JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  if (attempt < 0) attempt = r->job.attempts_size() == 0 ? -1 : r->job.attempt();
  const v1::Attempt* found = nullptr;
  for (const v1::Attempt& a : r->job.attempts()) {
    if (a.attempt() == attempt) found = &a;
  }
  if (found == nullptr) {
    return Status::NotFound("job " + id + " has no attempt " + std::to_string(attempt) +
                            (attempt < 0 ? " (it has not been placed yet)" : ""));
  }
  std::string worker;
  std::vector<int> ranks;
  for (const v1::NodeAssignment& n : found->nodes()) {
    for (int rk : n.ranks()) {
      if (rk == rank) worker = n.worker();
      ranks.push_back(rk);
    }
  }
  if (worker.empty()) {
    // A usage error (the job exists): INVALID_ARGUMENT, so the CLI exits 2, not 4.
    return Status::InvalidArgument("job " + id + " has no rank " + std::to_string(rank) +
                                   "; its ranks are " + RankRanges(ranks) +
                                   (found != &r->job.attempts(r->job.attempts_size() - 1)
                                        ? " (attempt " + std::to_string(attempt) + ")"
                                        : ""));
  }
  const int64_t request_id = logs_.Add(std::move(fn), wait_ms, worker);
  v1::CoordinatorMessage msg;
  v1::ReadLogs* read = msg.mutable_read_logs();
  read->set_request_id(request_id);
  read->set_job_id(id);
  read->set_job_uid(r->job.uid());
  read->set_attempt(attempt);
  read->set_rank(rank);
  read->set_offset(offset);
  read->set_max_bytes(max_bytes);
  read->set_wait_ms(wait_ms);
  if (!channel_.Send(worker, msg)) {
    logs_.Cancel(request_id);
    return Status::Unavailable("worker " + worker + " that ran rank " + std::to_string(rank) +
                               " is not connected");
  }
  return attempt;
}

std::vector<v1::WorkerInfo> JobManager::ListWorkers() const {
  std::vector<v1::WorkerInfo> out = workers_.List();
  for (v1::WorkerInfo& w : out) AddUse(w);
  return out;
}

JobManager::WorkerPage JobManager::ListWorkersPage(const WorkerQuery& query) const {
  WorkerPage page;
  bool more = false;
  page.workers = workers_.ListAfter(query.after, static_cast<size_t>(query.limit), &more);
  for (v1::WorkerInfo& w : page.workers) AddUse(w);
  if (more && !page.workers.empty()) {
    page.next_page_token = WorkerPageToken(page.workers.back().name());
  }
  return page;
}

StatusOr<v1::WorkerInfo> JobManager::SetDrained(const std::string& worker, bool drained,
                                                const std::string& by, bool now) {
  const v1::WorkerInfo* before = workers_.Find(worker);
  if (before == nullptr) return Status::NotFound("no worker named '" + worker + "'");
  const bool changed = before->drained() != drained;
  const v1::WorkerInfo* info = workers_.SetDrained(worker, drained, by.empty() ? "local" : by);
  if (changed) {
    CONVOY_RETURN_IF_ERROR(store_.SaveWorker(*info));
    spdlog::info("worker {} {} by {}", worker, drained ? "drained" : "undrained",
                 by.empty() ? "local" : by);
    if (!drained && !table_.waiting().empty()) schedule_needed_ = true;
  }
  if (drained && now) {
    // Preempted whatever their priority: an admin empties the machine (maintenance).
    const std::vector<std::string> held = table_.JobsOn(worker);
    const std::string who = by.empty() ? "local" : by;
    for (const std::string& id : held) {
      Preempt(table_.at(id),
              "worker " + worker + " drained now by " + who +
                  "; its ranks checkpoint and stop, and it waits to run elsewhere",
              "drain");
    }
  }
  v1::WorkerInfo out = *workers_.Find(worker);
  AddUse(out);
  return out;
}

Status JobManager::Transition(JobRecord& r, v1::JobState to, const std::string& reason,
                              const v1::RankFailure* failure) {
  const v1::JobState from = r.job.state();
  CONVOY_RETURN_IF_ERROR(CheckTransition(from, to));
  v1::JobEvent event;
  event.set_time_unix_ms(clock_.NowUnixMs());
  event.set_from(from);
  event.set_to(to);
  event.set_attempt(r.job.attempt());
  event.set_reason(reason);
  if (failure != nullptr) *event.mutable_failure() = *failure;

  v1::Job next = r.job;
  next.set_state(to);
  next.set_updated_unix_ms(event.time_unix_ms());
  next.set_message(reason);
  next.clear_events();
  Status st = store_.SaveJob(next, &event);
  if (!st.ok()) {
    spdlog::error("job {}: cannot persist {} -> {} ({}); not acting on it: {}", r.job.id(),
                  StateName(from), StateName(to), reason, st.message());
    return Status::Unavailable("cannot persist the transition: " + st.message());
  }
  // A finished job's history is final: written with its last transition's batch.
  if (IsTerminal(to) && table_.TakeHistoryDirty(r.job.id())) SaveHistory(r);
  *next.mutable_events() = std::move(*r.job.mutable_events());
  *next.add_events() = event;
  r.job = std::move(next);
  table_.MarkClean(r.job.id());
  Track(r.job.id(), from, to);
  spdlog::info("job {}: {} -> {}: {}", r.job.id(), StateName(from), StateName(to), reason);

  v1::WatchJobResponse ev;
  *ev.mutable_event() = event;
  watches_.Notify(r.job.id(), ev);
  v1::WatchJobResponse snap;
  *snap.mutable_job() = r.job;
  watches_.Notify(r.job.id(), snap);
  if (IsTerminal(to)) {
    watches_.Close(r.job.id(), snap);
    SendJobFinished(r);
  }
  return Status::Ok();
}

void JobManager::Persist(JobRecord& r) {
  r.job.set_updated_unix_ms(clock_.NowUnixMs());
  table_.MarkDirty(r.job.id());
}

void JobManager::FlushDirty() {
  for (const std::string& id : table_.TakeDirty()) SaveNow(table_.at(id));
  const int64_t now = clock_.NowMonotonicMs();
  std::set<std::string>& history_dirty = table_.history_dirty();
  for (auto it = history_dirty.begin(); it != history_dirty.end();) {
    JobRecord& r = table_.at(*it);
    if (!IsTerminal(r.job.state()) &&
        now - r.history_saved_mono_ms < options_.history_save_interval_ms) {
      ++it;
      continue;
    }
    SaveHistory(r);
    it = history_dirty.erase(it);
  }
}

void JobManager::SaveHistory(JobRecord& r) {
  r.history_saved_mono_ms = clock_.NowMonotonicMs();
  Status st = store_.SaveJobMetrics(r.history.history());
  if (!st.ok()) {
    spdlog::error("job {}: cannot persist its metric history: {}", r.job.id(), st.message());
  }
}

void JobManager::SaveNow(JobRecord& r) {
  r.job.set_updated_unix_ms(clock_.NowUnixMs());
  v1::Job copy = r.job;
  copy.clear_events();
  Status st = store_.SaveJob(copy, nullptr);
  if (!st.ok()) spdlog::error("job {}: cannot persist: {}", r.job.id(), st.message());
}

bool JobManager::PlaceOn(JobRecord& r, const std::vector<std::string>& chosen_workers) {
  const std::vector<std::string>* chosen = &chosen_workers;
  const v1::JobSpec& spec = r.job.spec();
  std::vector<PlannedNode> planned;
  std::string names;
  for (const std::string& name : *chosen) {
    const v1::WorkerInfo* w = workers_.Find(name);
    PlannedNode node{name, w->address(), ProcsPerNode(spec, w->gpus_size()), {}};
    // Each process's share: the lowest free GPU indices, gpus_per_proc each, in local rank
    // order; its cores and memory as asked.
    const int gpp = GpusPerProc(spec);
    if (gpp > 0 || spec.cpus_per_proc() > 0 || spec.memory_per_proc_bytes() > 0) {
      const std::vector<int> free = ledger_.FreeGpus(*w);
      for (int i = 0; i < node.procs; ++i) {
        v1::RankResources res;
        for (int k = 0; k < gpp && static_cast<size_t>(i * gpp + k) < free.size(); ++k) {
          res.add_gpus(free[static_cast<size_t>(i * gpp + k)]);
        }
        res.set_cpus(spec.cpus_per_proc());
        res.set_memory_bytes(spec.memory_per_proc_bytes());
        node.resources.push_back(std::move(res));
      }
    }
    planned.push_back(std::move(node));
    names += (names.empty() ? "" : ", ") + name;
  }
  const int attempt =
      r.job.attempts_size() == 0 ? 0 : r.job.attempts(r.job.attempts_size() - 1).attempt() + 1;
  const v1::Job before = r.job;
  v1::Attempt* a = r.job.add_attempts();
  a->set_attempt(attempt);
  for (auto& n : PlanRanks(planned)) *a->add_nodes() = std::move(n);
  a->set_started_unix_ms(clock_.NowUnixMs());
  r.job.set_attempt(attempt);
  const int64_t waited_since = r.waiting_since_mono_ms;
  if (!Transition(r, v1::SCHEDULED, "attempt " + std::to_string(attempt) + " placed on " + names)
           .ok()) {
    r.job = before;
    return false;
  }
  AttemptRuntime rt = NewRuntime();
  rt.attempt = attempt;
  rt.released = false;
  const int64_t now = clock_.NowMonotonicMs();
  rt.placed_mono_ms = now;
  rt.runtime_from_mono_ms = now;
  stats_.AttemptStarted();
  stats_.Observe(Phase::kQueue, waited_since);
  if (attempt == 0) {
    const int64_t since_submit_ms =
        std::max<int64_t>(0, clock_.NowUnixMs() - r.job.created_unix_ms());
    stats_.Record(Phase::kSchedule, static_cast<double>(since_submit_ms) / 1000.0);
  }
  rt.deadline_mono_ms = now + options_.rendezvous_timeout_ms;
  rt.failures.SetRendezvousDeadline(rt.deadline_mono_ms);
  // Transition replaced r.job: `a` points into the old copy.
  a = r.job.mutable_attempts(r.job.attempts_size() - 1);
  for (const v1::NodeAssignment& n : a->nodes()) {
    for (int i = 0; i < n.ranks_size(); ++i) {
      RankRuntime& rr = rt.ranks[n.ranks(i)];
      rr.worker = n.worker();
      rr.local_rank = i;
      rr.last_progress_mono_ms = now;
      if (i < n.resources_size()) rr.resources = n.resources(i);
    }
  }
  Attach(r, std::move(rt));
  const std::string& master = (*chosen)[0];
  if (!Transition(r, v1::RENDEZVOUS, "reserving the master port on " + master).ok()) return true;
  v1::CoordinatorMessage msg;
  msg.mutable_reserve_port()->set_job_id(r.job.id());
  msg.mutable_reserve_port()->set_job_uid(r.job.uid());
  msg.mutable_reserve_port()->set_attempt(attempt);
  if (!channel_.Send(master, msg)) {
    ReportFailure(r, FailureFor(r, 0, master));
  }
  return true;
}

void JobManager::FailAttempt(JobRecord& r, const v1::RankFailure& cause) {
  if (r.rt.tearing_down || IsTerminal(r.job.state())) return;
  if (v1::Attempt* a = CurrentAttempt(r)) {
    *a->mutable_failure() = cause;
    a->set_ended_unix_ms(clock_.NowUnixMs());
  }
  const v1::JobSpec& spec = r.job.spec();
  Status st;
  const bool resize = IsElastic(spec) && cause.cause() == v1::FAILURE_WORKER_LOST;
  if (resize) {
    // An elastic job goes on with the workers it has left (or waits for min_nodes): losing a
    // worker is a resize, not a failure.
    st = Transition(r, v1::RESTARTING,
                    cause.reason() + "; continuing with the workers left (elastic: " +
                        std::to_string(spec.min_nodes()) + " to " +
                        std::to_string(spec.max_nodes()) + " nodes, no restart used)",
                    &cause);
  } else if (r.job.restarts() < spec.max_restarts()) {
    r.job.set_restarts(r.job.restarts() + 1);
    st = Transition(r, v1::RESTARTING,
                    cause.reason() + "; restarting (restart " + std::to_string(r.job.restarts()) +
                        " of " + std::to_string(spec.max_restarts()) + ")",
                    &cause);
    if (!st.ok()) r.job.set_restarts(r.job.restarts() - 1);
  } else {
    st = Transition(r, v1::FAILED,
                    cause.reason() + (spec.max_restarts() > 0 ? "; no restarts left" : ""), &cause);
  }
  if (!st.ok()) return;
  // Counted once the decision stands.
  stats_.AttemptFailed(cause, r.job.state() == v1::RESTARTING && !resize);
  SendKill(r, cause.reason());
  MaybeFinishTeardown(r);
}

void JobManager::SendKill(JobRecord& r, const std::string& reason, bool preempt) {
  AttemptRuntime& rt = r.rt;
  rt.tearing_down = true;
  rt.preempting = preempt;
  rt.failures.Clear();
  const int64_t grace = preempt ? options_.preempt_grace_ms : options_.kill_grace_ms;
  rt.deadline_mono_ms = clock_.NowMonotonicMs() + grace + options_.teardown_slack_ms;
  for (const auto& [worker, ranks] : rt.ranks_by_worker) {
    bool any = false;
    for (int rank : ranks) any = any || !rt.ranks[rank].gone;
    if (!any) continue;
    v1::CoordinatorMessage msg;
    v1::Kill* kill = msg.mutable_kill();
    kill->set_job_id(r.job.id());
    kill->set_job_uid(r.job.uid());
    kill->set_attempt(rt.attempt);
    kill->set_grace_ms(static_cast<int32_t>(grace));
    kill->set_reason(reason);
    kill->set_preempt(preempt);
    if (!channel_.Send(worker, msg)) {
      spdlog::warn(
          "job {}: cannot reach worker {} to kill attempt {}; it kills the ranks "
          "itself when it reconnects or loses the coordinator",
          r.job.id(), worker, rt.attempt);
    }
  }
}

void JobManager::MaybeFinishTeardown(JobRecord& r) {
  AttemptRuntime& rt = r.rt;
  if (rt.released || rt.attempt < 0) return;
  // Only a decided attempt is released: one whose failure is still being attributed (the
  // failure window) must keep its state even when every rank is already gone.
  if (!rt.tearing_down && !IsTerminal(r.job.state())) return;
  const bool all_gone = rt.gone_count == rt.ranks.size();
  const bool expired = rt.tearing_down && clock_.NowMonotonicMs() >= rt.deadline_mono_ms;
  if (!all_gone && !expired) return;
  if (!all_gone) {
    spdlog::warn(
        "job {}: ranks of attempt {} not reported gone by the teardown deadline; "
        "releasing their slots",
        r.job.id(), rt.attempt);
    for (auto& [rank, rr] : rt.ranks) MarkGone(rt, rr);
  }
  rt.released = true;
  if (v1::Attempt* a = CurrentAttempt(r); a != nullptr && a->ended_unix_ms() == 0) {
    a->set_ended_unix_ms(clock_.NowUnixMs());
  }
  Detach(r);
  Persist(r);
}

v1::RankFailure JobManager::FailureFor(const JobRecord& r, int rank,
                                       const std::string& worker) const {
  v1::RankFailure f;
  f.set_rank(rank);
  auto it = r.rt.ranks.find(rank);
  if (it != r.rt.ranks.end()) f.set_local_rank(it->second.local_rank);
  f.set_worker(worker);
  if (const v1::WorkerInfo* w = workers_.Find(worker)) {
    f.set_host(w->hostname().empty() ? w->address() : w->hostname() + " (" + w->address() + ")");
  }
  f.set_reason("rank " + std::to_string(rank) + " on worker " + worker + " is not reachable");
  f.set_cause(v1::FAILURE_WORKER_LOST);
  return f;
}

}  // namespace convoy

#include "coordinator/control/scheduling.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "coordinator/state/job_state_machine.h"
#include "spec/job_spec_validation.h"

namespace convoy {

void SchedulingController::Tick() {
  const int64_t now = clock_.NowMonotonicMs();
  if (now - usage_updated_mono_ms_ >= 1000) {
    AccountAndEnforceRuntime();
    GrowElasticJobs();
  }
  if (!table_.waiting().empty() && now >= next_pass_mono_ms_) needed_ = true;
  if (needed_) Pass();
}

std::vector<NodeHold> SchedulingController::Holds(const JobRecord& r) {
  std::vector<NodeHold> out;
  for (const auto& [worker, ranks] : r.rt.ranks_by_worker) {
    NodeHold h;
    h.worker = worker;
    for (int rank : ranks) {
      const RankRuntime& rr = r.rt.ranks.at(rank);
      if (rr.gone) continue;
      ++h.slots;
      h.gpus += rr.resources.gpus_size();
      h.cpus += rr.resources.cpus();
      h.memory += rr.resources.memory_bytes();
    }
    if (h.slots > 0) out.push_back(std::move(h));
  }
  return out;
}

Quota SchedulingController::QuotaOf(const v1::Job& job) const {
  Quota q = options_.quotas.For(job.owner(), job.owner_role());
  if (q.queued == 0 && q.queued_source == "--max-queued-per-user" && !job.owner().empty()) {
    q.queued = options_.max_queued_per_owner;
  }
  return q;
}

bool SchedulingController::IsPreemptible(const v1::JobSpec& spec) const {
  return spec.has_preemptible() ? spec.preemptible() : spec.priority() < options_.preemptible_below;
}

void SchedulingController::Pass() {
  needed_ = false;
  const int64_t now_mono = clock_.NowMonotonicMs(), now_unix = clock_.NowUnixMs();
  next_pass_mono_ms_ = now_mono + options_.reschedule_interval_ms;
  std::vector<WaitingJob> waiting;  // in submission order (ids sort so)
  for (const std::string& id : table_.waiting()) {
    const JobRecord& r = table_.at(id);
    const v1::JobState s = r.job.state();
    // A job whose previous attempt is still being stopped (restarting, or preempted back to
    // PENDING) waits for its slots to come back first.
    if ((s != v1::PENDING && s != v1::RESTARTING) || (r.rt.attempt >= 0 && !r.rt.released)) {
      continue;
    }
    if (hold_ && hold_(id)) continue;  // it waits for other jobs (its pending_reason says so)
    WaitingJob w;
    w.id = id;
    w.spec = &r.job.spec();
    w.owner = r.job.owner();
    w.submitted_ms = r.job.created_unix_ms();
    w.waiting_since_ms = now_unix - std::max<int64_t>(0, now_mono - r.waiting_since_mono_ms);
    if (r.job.attempts_size() > 0) {
      for (const auto& n : r.job.attempts(r.job.attempts_size() - 1).nodes()) {
        w.preferred.push_back(n.worker());
      }
    }
    w.avoid = r.avoid;  // when nodes are sick: placed there only when nothing else fits
    waiting.push_back(std::move(w));
  }
  if (waiting.empty()) return;
  std::vector<WorkerCapacity> capacity;
  // Workers that take no new ranks (drained, cordoned, unhealthy), named in why jobs wait.
  std::string held_back;
  int held_back_count = 0;
  for (const v1::WorkerInfo* w : workers_.Ready()) {
    if (!TakesNewRanks(*w)) {
      if (!w->drained() && ++held_back_count <= 3) {
        held_back += (held_back.empty() ? "; no new ranks on " : ", ") + w->name() + " (" +
                     WhyNoNewRanks(*w) + ")";
      }
      continue;
    }
    capacity.push_back(ledger_.CapacityOf(*w));
  }
  if (held_back_count > 3) held_back += " and " + std::to_string(held_back_count - 3) + " more";
  ScheduleContext context;
  context.now_ms = now_unix;
  context.usage = usage_;
  for (const WaitingJob& w : waiting) {
    if (!w.owner.empty() && context.quotas.count(w.owner) == 0) {
      context.quotas[w.owner] = QuotaOf(table_.at(w.id).job);
    }
  }
  for (const std::string& id : table_.attached()) {
    const JobRecord& r = table_.at(id);
    RunningJob running;
    running.id = id;
    running.owner = r.job.owner();
    running.priority = r.job.spec().priority();
    running.preemptible = IsPreemptible(r.job.spec());
    running.stopping = r.rt.tearing_down || IsTerminal(r.job.state());
    const v1::Attempt* a =
        r.job.attempts_size() > 0 ? &r.job.attempts(r.job.attempts_size() - 1) : nullptr;
    if (a != nullptr) running.started_ms = a->started_unix_ms();
    if (r.job.spec().max_runtime_s() > 0 && a != nullptr && a->started_unix_ms() > 0) {
      running.ends_by_ms = a->started_unix_ms() + r.job.spec().max_runtime_s() * 1000;
    }
    running.slots = Holds(r);
    context.running.push_back(std::move(running));
  }
  SchedulePlan plan = scheduler_.Plan(waiting, std::move(capacity), context);
  for (const Preemption& p : plan.preemptions) {
    JobRecord* victim = table_.Find(p.victim);
    const JobRecord* for_job = table_.Find(p.for_job);
    if (victim == nullptr || for_job == nullptr) continue;
    lifecycle_.Preempt(*victim,
                       "preempted by " + p.for_job + " (priority " +
                           std::to_string(for_job->job.spec().priority()) + " over " +
                           std::to_string(victim->job.spec().priority()) +
                           "); its ranks checkpoint and stop, and it waits to resume",
                       "priority");
  }
  std::set<std::string> placed;
  for (const Placement& p : plan.placements) {
    JobRecord* r = table_.Find(p.id);
    if (r == nullptr || !table_.waiting().count(p.id)) continue;
    if (lifecycle_.Place(*r, p.workers)) placed.insert(p.id);
  }
  for (const std::string& id : placed) {
    v1::Job& job = table_.at(id).job;
    job.clear_pending_reason();
    job.clear_queue_position();
    job.clear_estimated_start_unix_ms();
  }
  // Why the others wait: kept in memory (GetJob, `convoy queue`), recomputed by every pass.
  for (const QueueEntry& e : plan.queue) {
    JobRecord* r = table_.Find(e.id);
    if (r == nullptr || placed.count(e.id)) continue;
    r->job.set_pending_reason(e.reason + held_back);
    r->job.set_queue_position(e.position);
    r->job.set_estimated_start_unix_ms(e.estimated_start_ms);
  }
  for (const WaitingJob& w : waiting) {
    if (placed.count(w.id)) continue;
    JobRecord& r = table_.at(w.id);
    if (r.job.state() == v1::RESTARTING) {
      const int need = MinNodes(r.job.spec());
      (void)writer_.Transition(r, v1::PENDING,
                               "waiting for " + std::to_string(need) + " worker" +
                                   (need == 1 ? "" : "s") + " with free slots to restart");
    }
  }
}

void SchedulingController::GrowElasticJobs() {
  if (!table_.waiting().empty()) return;  // free workers go to waiting jobs first
  const int64_t now = clock_.NowMonotonicMs();
  std::vector<const v1::WorkerInfo*> ready;
  for (const v1::WorkerInfo* w : workers_.Ready()) {
    if (TakesNewRanks(*w)) ready.push_back(w);
  }
  std::vector<std::string> grow;
  for (const std::string& id : table_.attached()) {
    JobRecord& r = table_.at(id);
    const v1::JobSpec& spec = r.job.spec();
    if (!IsElastic(spec) || r.job.state() != v1::RUNNING || r.rt.tearing_down) continue;
    const int nodes = static_cast<int>(r.rt.ranks_by_worker.size());
    if (nodes >= spec.max_nodes()) continue;
    const int64_t interval = spec.resize_interval_s() > 0 ? int64_t{spec.resize_interval_s()} * 1000
                                                          : options_.min_resize_interval_ms;
    if (r.rt.placed_mono_ms > 0 && now - r.rt.placed_mono_ms < interval) continue;
    int more = 0;
    std::string joined;
    for (const v1::WorkerInfo* w : ready) {
      if (r.rt.ranks_by_worker.count(w->name()) != 0) continue;
      const WorkerCapacity c = ledger_.CapacityOf(*w);
      // Same shape: a GPU job grows only onto workers with its nodes' GPU count.
      if (spec.procs_per_node_gpu() && !r.rt.ranks_by_worker.empty() &&
          ProcsPerNode(spec, c.gpus) !=
              static_cast<int>(r.rt.ranks_by_worker.begin()->second.size())) {
        continue;
      }
      if (!FitsNode(spec, c)) continue;
      ++more;
      joined += (joined.empty() ? "" : ", ") + w->name();
      if (nodes + more >= spec.max_nodes()) break;
    }
    if (more == 0) continue;
    grow.push_back(id);
    r.job.set_message("growing from " + std::to_string(nodes) + " to " +
                      std::to_string(nodes + more) + " nodes: " + joined +
                      (more == 1 ? " is" : " are") + " free");
  }
  for (const std::string& id : grow) {
    JobRecord& r = table_.at(id);
    lifecycle_.Preempt(
        r, r.job.message() + "; its ranks checkpoint and stop, then it restarts larger", "resize");
  }
}

void SchedulingController::AccountAndEnforceRuntime() {
  const int64_t now = clock_.NowMonotonicMs();
  const double dt_s =
      usage_updated_mono_ms_ == 0 ? 0.0 : static_cast<double>(now - usage_updated_mono_ms_) / 1000;
  usage_updated_mono_ms_ = now;
  const double decay =
      options_.usage_half_life_ms > 0
          ? std::exp2(-dt_s * 1000 / static_cast<double>(options_.usage_half_life_ms))
          : 0.0;
  for (auto it = usage_.begin(); it != usage_.end();) {
    it->second *= decay;
    it = it->second < 1e-3 ? usage_.erase(it) : std::next(it);
  }
  std::vector<std::string> overdue;
  for (const std::string& id : table_.attached()) {
    JobRecord& r = table_.at(id);
    if (r.rt.released) continue;
    const double held = static_cast<double>(r.rt.ranks.size() - r.rt.gone_count);
    if (held > 0 && dt_s > 0) usage_[r.job.owner()] += held * dt_s;
    const int64_t limit_s = r.job.spec().max_runtime_s();
    const v1::Attempt* a =
        r.job.attempts_size() > 0 ? &r.job.attempts(r.job.attempts_size() - 1) : nullptr;
    if (limit_s <= 0 || a == nullptr || a->started_unix_ms() <= 0 || r.rt.tearing_down ||
        IsTerminal(r.job.state())) {
      continue;
    }
    // Timed on the monotonic clock from the placement, so that a step of the wall clock
    // (NTP) neither fails a job early nor lets it overrun. An attempt restored after a
    // coordinator restart starts from the wall clock once, then runs on the monotonic one.
    if (r.rt.runtime_from_mono_ms <= 0) {
      r.rt.runtime_from_mono_ms =
          now - std::max<int64_t>(0, clock_.NowUnixMs() - a->started_unix_ms());
    }
    if (now - r.rt.runtime_from_mono_ms > limit_s * 1000) overdue.push_back(id);
  }
  for (const std::string& id : overdue) {
    JobRecord& r = table_.at(id);
    const std::string why =
        "max_runtime of " + std::to_string(r.job.spec().max_runtime_s()) + " s exceeded; stopped";
    if (!writer_.Transition(r, v1::FAILED, why).ok()) continue;
    lifecycle_.Stop(r, why);
  }
}

}  // namespace convoy

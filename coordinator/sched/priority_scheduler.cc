#include "coordinator/sched/priority_scheduler.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace convoy {
namespace {

struct Release {
  int64_t at_ms = 0;
  std::string id;
  std::vector<NodeHold> slots;
};

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  const size_t shown = std::min<size_t>(ids.size(), 3);
  for (size_t i = 0; i < shown; ++i) out += (i > 0 ? ", " : "") + ids[i];
  if (ids.size() > shown) out += " and " + std::to_string(ids.size() - shown) + " more";
  return out;
}

// What an owner's running jobs hold now (and as placements are made in a pass).
struct OwnerUse {
  int slots = 0;
  int gpus = 0;
};

}  // namespace

int PriorityScheduler::EffectivePriority(const v1::JobSpec& spec, int64_t waiting_since_ms,
                                         int64_t now_ms) const {
  int64_t p = spec.priority();
  if (policy_.ageing_ms > 0 && waiting_since_ms > 0 && now_ms > waiting_since_ms) {
    p += (now_ms - waiting_since_ms) / policy_.ageing_ms;
  }
  return static_cast<int>(std::min<int64_t>(p, std::numeric_limits<int>::max()));
}

std::vector<std::string> PriorityScheduler::ChooseVictims(
    const v1::JobSpec& spec, const std::vector<std::string>& preferred,
    const std::vector<WorkerCapacity>& capacity, const std::vector<RunningJob>& running) {
  // Candidates: preemptible, of lower priority, not already stopping; the lowest priority
  // first, then the youngest (the least work since its start to redo, should it have no
  // checkpoint), then by id.
  std::vector<const RunningJob*> candidates;
  for (const RunningJob& r : running) {
    if (r.preemptible && !r.stopping && r.priority < spec.priority()) candidates.push_back(&r);
  }
  std::sort(candidates.begin(), candidates.end(), [](const RunningJob* a, const RunningJob* b) {
    if (a->priority != b->priority) return a->priority < b->priority;
    if (a->started_ms != b->started_ms) return a->started_ms > b->started_ms;
    return a->id < b->id;
  });
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < capacity.size(); ++i) by_name[capacity[i].name] = i;
  auto fits_without = [&](const std::vector<const RunningJob*>& victims) {
    std::vector<WorkerCapacity> sim = capacity;
    for (const RunningJob* v : victims) {
      for (const NodeHold& h : v->slots) {
        auto it = by_name.find(h.worker);
        if (it != by_name.end()) Apply(h, sim[it->second], -1);
      }
    }
    return PlaceGang(spec, sim, preferred).has_value();
  };
  std::vector<const RunningJob*> chosen;
  bool enough = false;
  for (const RunningJob* c : candidates) {
    chosen.push_back(c);
    if ((enough = fits_without(chosen))) break;
  }
  if (!enough) return {};
  // Keep only the victims that are needed: try to spare each, the most valuable (highest
  // priority, oldest: chosen last) first.
  for (size_t i = chosen.size(); i-- > 0;) {
    std::vector<const RunningJob*> without = chosen;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    if (!without.empty() && fits_without(without)) chosen = std::move(without);
  }
  std::vector<std::string> ids;
  for (const RunningJob* v : chosen) ids.push_back(v->id);
  return ids;
}

namespace {

// One pass of PriorityScheduler::Plan over the queue, in its order: what is placed, what is
// held for the first in line, who is preempted, and why each job left waits.
class PriorityPass {
 public:
  PriorityPass(const PriorityPolicy& policy, std::vector<WorkerCapacity> capacity,
               const ScheduleContext& ctx);
  // Places `job` now, holds for it as the first in line, backfills it, or says why it waits.
  void Visit(const WaitingJob& job, int effective);
  SchedulePlan Take() { return std::move(plan_); }

 private:
  // Why `job` waits for its owner's quota; empty when it is within it.
  std::string OverQuota(const WaitingJob& job);
  void Place(const WaitingJob& job, const std::vector<std::string>& chosen);
  void Wait(const WaitingJob& job, int effective, std::string reason, int64_t start);
  // Lower-priority preemptible jobs that free enough for `job` now (and their releases, now).
  std::vector<std::string> Preempt(const WaitingJob& job);
  // `job` is the first that does not fit: it preempts, or has slots held where it will fit.
  void Reserve(const WaitingJob& job, int effective);
  // A job behind the first in line: placed where it does not take the held slots, or on
  // them when it ends before the first in line starts.
  void Backfill(const WaitingJob& job, int effective);
  // `capacity` with what `r` holds given back.
  void GiveBack(const Release& r, std::vector<WorkerCapacity>& capacity) const;

  const PriorityPolicy& policy_;
  const ScheduleContext& ctx_;
  const int64_t now_;
  std::vector<WorkerCapacity> capacity_;
  std::unordered_map<std::string, size_t> by_name_;
  // When slots come back: jobs being stopped (now), running jobs with a max_runtime, and the
  // jobs placed in this pass.
  std::vector<Release> releases_;
  std::vector<Release> open_ended_;  // running without a max_runtime
  // What each owner's jobs run now (quotas), and as placements are made in this pass.
  std::map<std::string, OwnerUse> owner_use_;
  SchedulePlan plan_;
  bool reserved_ = false;
  std::string holder_;
  int64_t holder_start_ = 0;
  std::vector<NodeHold> hold_;     // per worker, what is held for the first in line
  std::set<std::string> victims_;  // preempted in this pass
};

PriorityPass::PriorityPass(const PriorityPolicy& policy, std::vector<WorkerCapacity> capacity,
                           const ScheduleContext& ctx)
    : policy_(policy),
      ctx_(ctx),
      now_(ctx.now_ms),
      capacity_(std::move(capacity)),
      hold_(capacity_.size()) {
  for (size_t i = 0; i < capacity_.size(); ++i) by_name_[capacity_[i].name] = i;
  for (const RunningJob& r : ctx_.running) {
    const int64_t at = r.stopping ? now_ : r.ends_by_ms;
    (at > 0 ? releases_ : open_ended_).push_back({at, r.id, r.slots});
  }
  for (const RunningJob& r : ctx_.running) {
    if (r.stopping) continue;
    for (const NodeHold& h : r.slots) {
      owner_use_[r.owner].slots += h.slots;
      owner_use_[r.owner].gpus += h.gpus;
    }
  }
}

void PriorityPass::GiveBack(const Release& r, std::vector<WorkerCapacity>& capacity) const {
  for (const NodeHold& h : r.slots) {
    auto it = by_name_.find(h.worker);
    if (it != by_name_.end()) Apply(h, capacity[it->second], -1);
  }
}

void PriorityPass::Place(const WaitingJob& job, const std::vector<std::string>& chosen) {
  Release rel{
      job.spec->max_runtime_s() > 0 ? now_ + job.spec->max_runtime_s() * 1000 : 0, job.id, {}};
  for (const std::string& name : chosen) {
    WorkerCapacity& w = capacity_[by_name_.at(name)];
    const NodeHold need = NodeNeeds(*job.spec, w);
    Apply(need, w, 1);
    rel.slots.push_back(need);
    owner_use_[job.owner].slots += need.slots;
    owner_use_[job.owner].gpus += need.gpus;
  }
  (rel.at_ms > 0 ? releases_ : open_ended_).push_back(std::move(rel));
  plan_.placements.push_back({job.id, chosen});
}

void PriorityPass::Wait(const WaitingJob& job, int effective, std::string reason, int64_t start) {
  QueueEntry e;
  e.id = job.id;
  e.position = static_cast<int>(plan_.queue.size()) + 1;
  e.effective_priority = effective;
  e.reason = std::move(reason);
  e.estimated_start_ms = start;
  plan_.queue.push_back(std::move(e));
}

std::string PriorityPass::OverQuota(const WaitingJob& job) {
  if (job.owner.empty()) return "";
  const v1::JobSpec& spec = *job.spec;
  Quota quota;
  if (auto it = ctx_.quotas.find(job.owner); it != ctx_.quotas.end()) {
    quota = it->second;
  } else {
    quota.slots = policy_.max_slots_per_owner;
    quota.source = "--max-slots-per-user";
  }
  if (quota.slots <= 0 && quota.gpus <= 0) return "";
  // The job's size where it would run now, or on the idlest workers.
  NodeHold size;
  if (auto where = PlaceGang(spec, capacity_, job.preferred)) {
    for (const std::string& name : *where) {
      const NodeHold n = NodeNeeds(spec, capacity_[by_name_.at(name)]);
      size.slots += n.slots;
      size.gpus += n.gpus;
    }
  } else if (!spec.procs_per_node_gpu()) {
    size.slots = MinNodes(spec) * spec.procs_per_node();
    size.gpus = size.slots * GpusPerProc(spec);
  }
  const OwnerUse used = owner_use_[job.owner];
  if (quota.slots > 0 && used.slots + size.slots > quota.slots) {
    return job.owner + "'s running jobs use " + std::to_string(used.slots) + " of " +
           std::to_string(quota.slots) + " processes (" + quota.source + ") and this one needs " +
           std::to_string(size.slots);
  }
  if (quota.gpus > 0 && used.gpus + size.gpus > quota.gpus) {
    return job.owner + "'s running jobs hold " + std::to_string(used.gpus) + " of " +
           std::to_string(quota.gpus) + " GPUs (" + quota.gpus_source + ") and this one needs " +
           std::to_string(size.gpus);
  }
  return "";
}

void PriorityPass::Visit(const WaitingJob& job, int effective) {
  if (std::string over = OverQuota(job); !over.empty()) {
    Wait(job, effective, "over quota: " + over, 0);
    return;
  }
  if (reserved_) {
    Backfill(job, effective);
    return;
  }
  if (auto chosen = PlaceGang(*job.spec, capacity_, job.preferred, job.avoid)) {
    Place(job, *chosen);
    return;
  }
  Reserve(job, effective);
}

std::vector<std::string> PriorityPass::Preempt(const WaitingJob& job) {
  const v1::JobSpec& spec = *job.spec;
  // Counting what jobs already being stopped (preempted earlier, failed, cancelled) give
  // back: a job that fits once they have stopped preempts nobody more.
  std::vector<WorkerCapacity> after_stopping = capacity_;
  std::vector<RunningJob> others;
  for (const RunningJob& r : ctx_.running) {
    if (r.stopping || victims_.count(r.id) != 0) {
      GiveBack({0, r.id, r.slots}, after_stopping);
    } else {
      others.push_back(r);
    }
  }
  std::vector<std::string> preempt;
  if (!PlaceGang(spec, after_stopping, job.preferred)) {
    preempt = PriorityScheduler::ChooseVictims(spec, job.preferred, after_stopping, others);
  }
  for (const std::string& v : preempt) {
    victims_.insert(v);
    plan_.preemptions.push_back({v, job.id});
    for (Release& r : releases_) {
      if (r.id == v) r.at_ms = now_;
    }
    for (auto it = open_ended_.begin(); it != open_ended_.end();) {
      if (it->id == v) {
        releases_.push_back({now_, it->id, it->slots});
        it = open_ended_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return preempt;
}

void PriorityPass::Reserve(const WaitingJob& job, int effective) {
  const v1::JobSpec& spec = *job.spec;
  const std::vector<std::string> preempt = Preempt(job);
  // First in line: when, and where, will it fit?
  std::vector<WorkerCapacity> sim = capacity_;
  std::sort(releases_.begin(), releases_.end(),
            [](const Release& a, const Release& b) { return a.at_ms < b.at_ms; });
  std::optional<std::vector<std::string>> at;
  int64_t start = 0;
  std::vector<std::string> awaited;
  for (const Release& r : releases_) {
    GiveBack(r, sim);
    awaited.push_back(r.id);
    if ((at = PlaceGang(spec, sim, job.preferred, job.avoid))) {
      start = r.at_ms;
      break;
    }
  }
  if (!at) {
    for (const Release& r : open_ended_) {
      GiveBack(r, sim);
      awaited.push_back(r.id);
    }
    at = PlaceGang(spec, sim, job.preferred, job.avoid);
  }
  std::string reason = WhyNoFit(spec, capacity_);
  if (!at) {
    // Not even an empty cluster of these workers fits it: holding slots would only waste
    // them.
    Wait(job, effective, reason + "; not even these workers idle would fit it", 0);
    return;
  }
  reserved_ = true;
  holder_ = job.id;
  holder_start_ = start;
  for (const std::string& name : *at) {
    const size_t w = by_name_.at(name);
    // Held: what it needs there, as far as it is free now.
    NodeHold need = NodeNeeds(spec, sim[w]);
    const WorkerCapacity& free = capacity_[w];
    need.slots = std::min(std::max(free.free_slots, 0), need.slots);
    need.gpus = std::min(std::max(free.FreeGpus(), 0), need.gpus);
    need.cpus = free.free_cpus < 0 ? 0 : std::min(free.free_cpus, need.cpus);
    need.memory = free.free_memory < 0 ? 0 : std::min(free.free_memory, need.memory);
    hold_[w] = need;
  }
  if (!preempt.empty()) {
    reason += "; preempting " + JoinIds(preempt) + " (lower priority): starts when " +
              std::string(preempt.size() == 1 ? "it has" : "they have") +
              " checkpointed and stopped";
  } else {
    reason += "; first in line, its slots are held as they free up";
    if (!awaited.empty()) {
      const std::string end = awaited.size() == 1 ? " ends" : " end";
      reason += "; starts when " + JoinIds(awaited) + end +
                (start > 0 ? " (by " + std::string(awaited.size() == 1 ? "its" : "their") +
                                 " max_runtime)"
                           : "");
    }
  }
  Wait(job, effective, reason, start);
}

void PriorityPass::Backfill(const WaitingJob& job, int effective) {
  const v1::JobSpec& spec = *job.spec;
  const bool ends_in_time = holder_start_ > 0 && spec.max_runtime_s() > 0 &&
                            now_ + spec.max_runtime_s() * 1000 <= holder_start_;
  std::vector<WorkerCapacity> view = capacity_;
  if (!ends_in_time) {
    for (size_t w = 0; w < view.size(); ++w) Apply(hold_[w], view[w], 1);
  }
  if (auto chosen = PlaceGang(spec, view, job.preferred, job.avoid)) {
    Place(job, *chosen);
    return;
  }
  if (PlaceGang(spec, capacity_, job.preferred)) {
    Wait(job, effective,
         "would fit now, but would delay " + holder_ + ", which is first in line" +
             (spec.max_runtime_s() == 0
                  ? " (a max_runtime that ends before it starts would let it backfill)"
                  : " (its max_runtime ends after " + holder_ + " is due to start)"),
         0);
  } else {
    Wait(job, effective, WhyNoFit(spec, capacity_) + "; behind " + holder_, 0);
  }
}

}  // namespace

SchedulePlan PriorityScheduler::Plan(const std::vector<WaitingJob>& waiting,
                                     std::vector<WorkerCapacity> capacity,
                                     const ScheduleContext& ctx) const {
  // The queue's order.
  std::vector<size_t> order(waiting.size());
  std::vector<int> effective(waiting.size());
  for (size_t i = 0; i < waiting.size(); ++i) {
    order[i] = i;
    effective[i] = EffectivePriority(*waiting[i].spec, waiting[i].waiting_since_ms, ctx.now_ms);
  }
  auto usage = [&ctx](const std::string& owner) {
    auto it = ctx.usage.find(owner);
    return it == ctx.usage.end() ? 0.0 : it->second;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (effective[a] != effective[b]) return effective[a] > effective[b];
    const double ua = usage(waiting[a].owner), ub = usage(waiting[b].owner);
    if (ua != ub) return ua < ub;
    if (waiting[a].submitted_ms != waiting[b].submitted_ms) {
      return waiting[a].submitted_ms < waiting[b].submitted_ms;
    }
    return waiting[a].id < waiting[b].id;
  });
  PriorityPass pass(policy_, std::move(capacity), ctx);
  for (size_t i : order) pass.Visit(waiting[i], effective[i]);
  return pass.Take();
}

}  // namespace convoy

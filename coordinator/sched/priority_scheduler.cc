#include "coordinator/sched/priority_scheduler.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

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

SchedulePlan PriorityScheduler::Plan(const std::vector<WaitingJob>& waiting,
                                     std::vector<WorkerCapacity> capacity,
                                     const ScheduleContext& ctx) const {
  const int64_t now = ctx.now_ms;
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < capacity.size(); ++i) by_name[capacity[i].name] = i;

  // The queue's order.
  std::vector<size_t> order(waiting.size());
  std::vector<int> effective(waiting.size());
  for (size_t i = 0; i < waiting.size(); ++i) {
    order[i] = i;
    effective[i] = EffectivePriority(*waiting[i].spec, waiting[i].waiting_since_ms, now);
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

  // When slots come back: jobs being stopped (now), running jobs with a max_runtime, and the
  // jobs placed below.
  std::vector<Release> releases;
  std::vector<Release> open_ended;  // running without a max_runtime
  for (const RunningJob& r : ctx.running) {
    const int64_t at = r.stopping ? now : r.ends_by_ms;
    (at > 0 ? releases : open_ended).push_back({at, r.id, r.slots});
  }

  // What each owner's jobs run now (quotas), and as placements are made below.
  std::map<std::string, OwnerUse> owner_use;
  for (const RunningJob& r : ctx.running) {
    if (r.stopping) continue;
    for (const NodeHold& h : r.slots) {
      owner_use[r.owner].slots += h.slots;
      owner_use[r.owner].gpus += h.gpus;
    }
  }
  auto quota_of = [&](const std::string& owner) {
    auto it = ctx.quotas.find(owner);
    if (it != ctx.quotas.end()) return it->second;
    Quota q;
    q.slots = policy_.max_slots_per_owner;
    q.source = "--max-slots-per-user";
    return q;
  };

  SchedulePlan plan;
  bool reserved = false;
  std::string holder;
  int64_t holder_start = 0;
  // Per worker, what is held for the first in line.
  std::vector<NodeHold> hold(capacity.size());
  std::set<std::string> victims;  // preempted in this pass

  auto take = [&](const WaitingJob& job, const std::vector<std::string>& chosen) {
    Release rel{
        job.spec->max_runtime_s() > 0 ? now + job.spec->max_runtime_s() * 1000 : 0, job.id, {}};
    for (const std::string& name : chosen) {
      WorkerCapacity& w = capacity[by_name.at(name)];
      const NodeHold need = NodeNeeds(*job.spec, w);
      Apply(need, w, 1);
      rel.slots.push_back(need);
      owner_use[job.owner].slots += need.slots;
      owner_use[job.owner].gpus += need.gpus;
    }
    (rel.at_ms > 0 ? releases : open_ended).push_back(std::move(rel));
    plan.placements.push_back({job.id, chosen});
  };
  auto wait = [&](const WaitingJob& job, int eff, std::string reason, int64_t start) {
    QueueEntry e;
    e.id = job.id;
    e.position = static_cast<int>(plan.queue.size()) + 1;
    e.effective_priority = eff;
    e.reason = std::move(reason);
    e.estimated_start_ms = start;
    plan.queue.push_back(std::move(e));
  };

  for (size_t i : order) {
    const WaitingJob& job = waiting[i];
    const v1::JobSpec& spec = *job.spec;
    if (!job.owner.empty()) {
      const Quota quota = quota_of(job.owner);
      if (quota.slots > 0 || quota.gpus > 0) {
        // The job's size where it would run now, or on the idlest workers.
        NodeHold size;
        if (auto where = PlaceGang(spec, capacity, job.preferred)) {
          for (const std::string& name : *where) {
            const NodeHold n = NodeNeeds(spec, capacity[by_name.at(name)]);
            size.slots += n.slots;
            size.gpus += n.gpus;
          }
        } else if (!spec.procs_per_node_gpu()) {
          size.slots = MinNodes(spec) * spec.procs_per_node();
          size.gpus = size.slots * GpusPerProc(spec);
        }
        const OwnerUse used = owner_use[job.owner];
        std::string over;
        if (quota.slots > 0 && used.slots + size.slots > quota.slots) {
          over = job.owner + "'s running jobs use " + std::to_string(used.slots) + " of " +
                 std::to_string(quota.slots) + " processes (" + quota.source +
                 ") and this one needs " + std::to_string(size.slots);
        } else if (quota.gpus > 0 && used.gpus + size.gpus > quota.gpus) {
          over = job.owner + "'s running jobs hold " + std::to_string(used.gpus) + " of " +
                 std::to_string(quota.gpus) + " GPUs (" + quota.gpus_source +
                 ") and this one needs " + std::to_string(size.gpus);
        }
        if (!over.empty()) {
          wait(job, effective[i], "over quota: " + over, 0);
          continue;
        }
      }
    }
    if (!reserved) {
      if (auto chosen = PlaceGang(spec, capacity, job.preferred)) {
        take(job, *chosen);
        continue;
      }
      // Preemption: lower-priority preemptible jobs that free enough for this one now,
      // counting what jobs already being stopped (preempted earlier, failed, cancelled)
      // give back: a job that fits once they have stopped preempts nobody more.
      std::vector<WorkerCapacity> after_stopping = capacity;
      std::vector<RunningJob> others;
      for (const RunningJob& r : ctx.running) {
        if (r.stopping || victims.count(r.id) != 0) {
          for (const NodeHold& h : r.slots) {
            auto it = by_name.find(h.worker);
            if (it != by_name.end()) Apply(h, after_stopping[it->second], -1);
          }
        } else {
          others.push_back(r);
        }
      }
      std::vector<std::string> preempt;
      if (!PlaceGang(spec, after_stopping, job.preferred)) {
        preempt = ChooseVictims(spec, job.preferred, after_stopping, others);
      }
      for (const std::string& v : preempt) {
        victims.insert(v);
        plan.preemptions.push_back({v, job.id});
        for (Release& r : releases) {
          if (r.id == v) r.at_ms = now;
        }
        for (auto it = open_ended.begin(); it != open_ended.end();) {
          if (it->id == v) {
            releases.push_back({now, it->id, it->slots});
            it = open_ended.erase(it);
          } else {
            ++it;
          }
        }
      }
      // First in line: when, and where, will it fit?
      std::vector<WorkerCapacity> sim = capacity;
      auto give_back = [&](const Release& r) {
        for (const NodeHold& h : r.slots) {
          auto it = by_name.find(h.worker);
          if (it != by_name.end()) Apply(h, sim[it->second], -1);
        }
      };
      std::sort(releases.begin(), releases.end(),
                [](const Release& a, const Release& b) { return a.at_ms < b.at_ms; });
      std::optional<std::vector<std::string>> at;
      int64_t start = 0;
      std::vector<std::string> awaited;
      for (const Release& r : releases) {
        give_back(r);
        awaited.push_back(r.id);
        if ((at = PlaceGang(spec, sim, job.preferred))) {
          start = r.at_ms;
          break;
        }
      }
      if (!at) {
        for (const Release& r : open_ended) {
          give_back(r);
          awaited.push_back(r.id);
        }
        at = PlaceGang(spec, sim, job.preferred);
      }
      std::string reason = WhyNoFit(spec, capacity);
      if (!at) {
        // Not even an empty cluster of these workers fits it: holding slots would only
        // waste them.
        wait(job, effective[i], reason + "; not even these workers idle would fit it", 0);
        continue;
      }
      reserved = true;
      holder = job.id;
      holder_start = start;
      for (const std::string& name : *at) {
        const size_t w = by_name.at(name);
        // Held: what it needs there, as far as it is free now.
        NodeHold need = NodeNeeds(spec, sim[w]);
        const WorkerCapacity& free = capacity[w];
        need.slots = std::min(std::max(free.free_slots, 0), need.slots);
        need.gpus = std::min(std::max(free.FreeGpus(), 0), need.gpus);
        need.cpus = free.free_cpus < 0 ? 0 : std::min(free.free_cpus, need.cpus);
        need.memory = free.free_memory < 0 ? 0 : std::min(free.free_memory, need.memory);
        hold[w] = need;
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
      wait(job, effective[i], reason, start);
      continue;
    }
    // Backfill around the first in line.
    const bool ends_in_time = holder_start > 0 && spec.max_runtime_s() > 0 &&
                              now + spec.max_runtime_s() * 1000 <= holder_start;
    std::vector<WorkerCapacity> view = capacity;
    if (!ends_in_time) {
      for (size_t w = 0; w < view.size(); ++w) Apply(hold[w], view[w], 1);
    }
    if (auto chosen = PlaceGang(spec, view, job.preferred)) {
      take(job, *chosen);
      continue;
    }
    if (PlaceGang(spec, capacity, job.preferred)) {
      wait(job, effective[i],
           "would fit now, but would delay " + holder + ", which is first in line" +
               (spec.max_runtime_s() == 0
                    ? " (a max_runtime that ends before it starts would let it backfill)"
                    : " (its max_runtime ends after " + holder + " is due to start)"),
           0);
    } else {
      wait(job, effective[i], WhyNoFit(spec, capacity) + "; behind " + holder, 0);
    }
  }
  return plan;
}

}  // namespace convoy

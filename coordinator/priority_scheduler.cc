#include "coordinator/priority_scheduler.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

namespace convoy {
namespace {

struct Release {
  int64_t at_ms = 0;
  std::string id;
  std::vector<std::pair<std::string, int>> slots;
};

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  const size_t shown = std::min<size_t>(ids.size(), 3);
  for (size_t i = 0; i < shown; ++i) out += (i > 0 ? ", " : "") + ids[i];
  if (ids.size() > shown) out += " and " + std::to_string(ids.size() - shown) + " more";
  return out;
}

}  // namespace

int PriorityScheduler::EffectivePriority(const v1::JobSpec& spec, int64_t waiting_since_ms,
                                         int64_t now_ms) const {
  int64_t p = spec.priority();
  if (policy_.ageing_ms > 0 && waiting_since_ms > 0 && now_ms > waiting_since_ms) {
    p += (now_ms - waiting_since_ms) / policy_.ageing_ms;
  }
  return static_cast<int>(std::min<int64_t>(p, std::numeric_limits<int>::max()));
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

  // When slots come back: running jobs with a max_runtime, and the jobs placed below.
  std::vector<Release> releases;
  std::vector<Release> open_ended;  // running without a max_runtime
  for (const RunningJob& r : ctx.running) {
    (r.ends_by_ms > 0 ? releases : open_ended).push_back({r.ends_by_ms, r.id, r.slots});
  }

  // Processes each owner's jobs run now (quota), and as placements are made below.
  std::map<std::string, int> owner_slots;
  for (const RunningJob& r : ctx.running) {
    for (const auto& [name, procs] : r.slots) owner_slots[r.owner] += procs;
  }
  auto needs = [&](const v1::JobSpec& spec, const std::vector<std::string>& chosen) {
    int n = 0;
    for (const std::string& name : chosen) n += ProcsPerNode(spec, capacity[by_name.at(name)].gpus);
    return n;
  };
  const int quota = policy_.max_slots_per_owner;

  SchedulePlan plan;
  bool reserved = false;
  std::string holder;
  int64_t holder_start = 0;
  std::vector<int> hold(capacity.size(), 0);  // slots held for the first in line, per worker

  auto take = [&](const WaitingJob& job, const std::vector<std::string>& chosen) {
    Release rel{
        job.spec->max_runtime_s() > 0 ? now + job.spec->max_runtime_s() * 1000 : 0, job.id, {}};
    for (const std::string& name : chosen) {
      WorkerCapacity& w = capacity[by_name.at(name)];
      const int procs = ProcsPerNode(*job.spec, w.gpus);
      w.free_slots -= procs;
      rel.slots.emplace_back(name, procs);
      owner_slots[job.owner] += procs;
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
    if (quota > 0 && !job.owner.empty()) {
      // The job's size where it would run now, or on the idlest workers.
      int size = spec.procs_per_node_gpu() ? 0 : spec.nodes() * spec.procs_per_node();
      if (size == 0) {
        if (auto where = PlaceGang(spec, capacity, job.preferred)) size = needs(spec, *where);
      }
      const int used = owner_slots[job.owner];
      if (used + size > quota) {
        wait(job, effective[i],
             "over quota: " + job.owner + "'s running jobs use " + std::to_string(used) + " of " +
                 std::to_string(quota) + " processes (--max-slots-per-user) and this one needs " +
                 std::to_string(size),
             0);
        continue;
      }
    }
    if (!reserved) {
      if (auto chosen = PlaceGang(spec, capacity, job.preferred)) {
        take(job, *chosen);
        continue;
      }
      // First in line: when, and where, will it fit?
      std::vector<WorkerCapacity> sim = capacity;
      auto give_back = [&](const Release& r) {
        for (const auto& [name, procs] : r.slots) {
          auto it = by_name.find(name);
          if (it != by_name.end()) sim[it->second].free_slots += procs;
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
        hold[w] = std::min(std::max(capacity[w].free_slots, 0), ProcsPerNode(spec, sim[w].gpus));
      }
      reason += "; first in line, its slots are held as they free up";
      if (!awaited.empty()) {
        const std::string end = awaited.size() == 1 ? " ends" : " end";
        reason += "; starts when " + JoinIds(awaited) + end +
                  (start > 0 ? " (by " + std::string(awaited.size() == 1 ? "its" : "their") +
                                   " max_runtime)"
                             : "");
      }
      wait(job, effective[i], reason, start);
      continue;
    }
    // Backfill around the first in line.
    const bool ends_in_time = holder_start > 0 && spec.max_runtime_s() > 0 &&
                              now + spec.max_runtime_s() * 1000 <= holder_start;
    std::vector<WorkerCapacity> view = capacity;
    if (!ends_in_time) {
      for (size_t w = 0; w < view.size(); ++w) view[w].free_slots -= hold[w];
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

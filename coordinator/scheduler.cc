#include "coordinator/scheduler.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace convoy {

int ProcsPerNode(const v1::JobSpec& spec, int gpus) {
  return spec.procs_per_node_gpu() ? gpus : spec.procs_per_node();
}

namespace {

std::optional<std::vector<std::string>> PlaceGangAmong(const v1::JobSpec& spec,
                                                       const std::vector<WorkerCapacity>& workers,
                                                       const std::vector<std::string>& preferred) {
  const int nodes = spec.nodes();
  if (nodes <= 0) return std::nullopt;
  auto fits = [&spec](const WorkerCapacity& w) {
    int procs = ProcsPerNode(spec, w.gpus);
    return procs > 0 && w.free_slots >= procs;
  };
  // O(workers + preferred), then a partial sort of the rest: a restart of a 10,000-node job
  // on 10,000 workers must not compare every preferred name with every worker.
  std::vector<const WorkerCapacity*> ordered;
  std::unordered_set<std::string> taken;
  if (!preferred.empty()) {
    std::unordered_map<std::string, const WorkerCapacity*> by_name;
    by_name.reserve(workers.size());
    for (const WorkerCapacity& w : workers) by_name.emplace(w.name, &w);
    for (const std::string& name : preferred) {
      auto it = by_name.find(name);
      if (it == by_name.end() || !fits(*it->second) || !taken.insert(name).second) continue;
      ordered.push_back(it->second);
    }
  }
  std::vector<const WorkerCapacity*> rest;
  for (const WorkerCapacity& w : workers) {
    if (fits(w) && taken.count(w.name) == 0) rest.push_back(&w);
  }
  if (ordered.size() + rest.size() < static_cast<size_t>(nodes)) return std::nullopt;
  const size_t need =
      std::min(rest.size(),
               static_cast<size_t>(nodes) - std::min(ordered.size(), static_cast<size_t>(nodes)));
  std::partial_sort(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(need), rest.end(),
                    [](const WorkerCapacity* a, const WorkerCapacity* b) {
                      if (a->free_slots != b->free_slots) return a->free_slots > b->free_slots;
                      return a->name < b->name;
                    });
  ordered.insert(ordered.end(), rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(need));
  std::vector<std::string> chosen;
  for (int i = 0; i < nodes; ++i) chosen.push_back(ordered[i]->name);
  return chosen;
}

}  // namespace

std::optional<std::vector<std::string>> PlaceGang(const v1::JobSpec& spec,
                                                  const std::vector<WorkerCapacity>& workers,
                                                  const std::vector<std::string>& preferred) {
  if (!spec.procs_per_node_gpu()) return PlaceGangAmong(spec, workers, preferred);
  // One process per GPU: every node of the gang must run the same number of processes, or
  // the ranks of a 4-GPU and a 2-GPU node would not make one world. Try the GPU counts that
  // some fitting worker has: the preferred workers' first (a restart keeps its shape), then
  // the most processes per node.
  std::vector<int> counts;
  for (const std::string& name : preferred) {
    for (const WorkerCapacity& w : workers) {
      if (w.name == name && w.gpus > 0 &&
          std::find(counts.begin(), counts.end(), w.gpus) == counts.end()) {
        counts.push_back(w.gpus);
      }
    }
    if (!counts.empty()) break;
  }
  std::vector<int> others;
  for (const WorkerCapacity& w : workers) {
    if (w.gpus > 0 && w.free_slots >= w.gpus &&
        std::find(counts.begin(), counts.end(), w.gpus) == counts.end() &&
        std::find(others.begin(), others.end(), w.gpus) == others.end()) {
      others.push_back(w.gpus);
    }
  }
  std::sort(others.rbegin(), others.rend());
  counts.insert(counts.end(), others.begin(), others.end());
  for (int gpus : counts) {
    std::vector<WorkerCapacity> same;
    for (const WorkerCapacity& w : workers) {
      if (w.gpus == gpus) same.push_back(w);
    }
    if (auto chosen = PlaceGangAmong(spec, same, preferred)) return chosen;
  }
  return std::nullopt;
}

std::string WhyNoFit(const v1::JobSpec& spec, const std::vector<WorkerCapacity>& capacity) {
  int fit = 0, min_procs = -1, max_procs = 0;
  for (const WorkerCapacity& w : capacity) {
    const int procs = ProcsPerNode(spec, w.gpus);
    if (procs > 0 && w.free_slots >= procs) ++fit;
    if (procs > 0) {
      min_procs = min_procs < 0 ? procs : std::min(min_procs, procs);
      max_procs = std::max(max_procs, procs);
    }
  }
  std::string slots = spec.procs_per_node_gpu()
                          ? "a GPU per process (" + std::to_string(std::max(min_procs, 0)) +
                                (max_procs != min_procs ? "-" + std::to_string(max_procs) : "") +
                                ")"
                          : std::to_string(spec.procs_per_node()) + " free slot" +
                                (spec.procs_per_node() == 1 ? "" : "s");
  if (static_cast<int>(capacity.size()) < spec.nodes()) {
    return "needs " + std::to_string(spec.nodes()) + " workers with " + slots + "; " +
           std::to_string(capacity.size()) + " ready worker" +
           (capacity.size() == 1 ? " is" : "s are") + " taking jobs";
  }
  return "needs " + std::to_string(spec.nodes()) + " worker" + (spec.nodes() == 1 ? "" : "s") +
         " with " + slots + "; " + std::to_string(fit) + (fit == 1 ? " has" : " have") +
         " them now";
}

SchedulePlan FifoScheduler::Plan(const std::vector<WaitingJob>& waiting,
                                 std::vector<WorkerCapacity> capacity,
                                 const ScheduleContext& context) const {
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < capacity.size(); ++i) by_name[capacity[i].name] = i;
  SchedulePlan plan;
  for (const WaitingJob& job : waiting) {
    auto chosen = PlaceGang(*job.spec, capacity, job.preferred);
    if (!chosen) {
      QueueEntry e;
      e.id = job.id;
      e.position = static_cast<int>(plan.queue.size()) + 1;
      e.effective_priority = job.spec->priority();
      e.reason = WhyNoFit(*job.spec, capacity);
      plan.queue.push_back(std::move(e));
      continue;
    }
    for (const std::string& name : *chosen) {
      WorkerCapacity& w = capacity[by_name.at(name)];
      w.free_slots -= ProcsPerNode(*job.spec, w.gpus);
    }
    plan.placements.push_back({job.id, std::move(*chosen)});
  }
  return plan;
}

}  // namespace convoy

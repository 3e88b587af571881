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

std::optional<std::vector<std::string>> PlaceGang(const v1::JobSpec& spec,
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

std::vector<Placement> FifoScheduler::Schedule(const std::vector<WaitingJob>& waiting,
                                               std::vector<WorkerCapacity> capacity) const {
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < capacity.size(); ++i) by_name[capacity[i].name] = i;
  std::vector<Placement> out;
  for (const WaitingJob& job : waiting) {
    auto chosen = PlaceGang(*job.spec, capacity, job.preferred);
    if (!chosen) continue;
    for (const std::string& name : *chosen) {
      WorkerCapacity& w = capacity[by_name.at(name)];
      w.free_slots -= ProcsPerNode(*job.spec, w.gpus);
    }
    out.push_back({job.id, std::move(*chosen)});
  }
  return out;
}

}  // namespace convoy

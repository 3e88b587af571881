#include "coordinator/scheduler.h"

#include <algorithm>
#include <map>

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
  std::vector<const WorkerCapacity*> ordered;
  for (const std::string& name : preferred) {
    for (const WorkerCapacity& w : workers) {
      if (w.name == name && fits(w)) ordered.push_back(&w);
    }
  }
  std::vector<const WorkerCapacity*> rest;
  for (const WorkerCapacity& w : workers) {
    if (!fits(w)) continue;
    if (std::find(preferred.begin(), preferred.end(), w.name) != preferred.end()) continue;
    rest.push_back(&w);
  }
  std::sort(rest.begin(), rest.end(), [](const WorkerCapacity* a, const WorkerCapacity* b) {
    if (a->free_slots != b->free_slots) return a->free_slots > b->free_slots;
    return a->name < b->name;
  });
  ordered.insert(ordered.end(), rest.begin(), rest.end());
  if (static_cast<int>(ordered.size()) < nodes) return std::nullopt;
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

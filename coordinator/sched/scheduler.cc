#include "coordinator/sched/scheduler.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace convoy {

int GpusPerProc(const v1::JobSpec& spec) {
  if (spec.gpus_per_proc() > 0) return spec.gpus_per_proc();
  return spec.procs_per_node_gpu() ? 1 : 0;
}

int ProcsPerNode(const v1::JobSpec& spec, int gpus) {
  return spec.procs_per_node_gpu() ? gpus / GpusPerProc(spec) : spec.procs_per_node();
}

NodeHold NodeNeeds(const v1::JobSpec& spec, const WorkerCapacity& w) {
  NodeHold h;
  h.worker = w.name;
  h.slots = std::max(0, ProcsPerNode(spec, w.gpus));
  h.gpus = h.slots * GpusPerProc(spec);
  h.cpus = h.slots * spec.cpus_per_proc();
  h.memory = h.slots * spec.memory_per_proc_bytes();
  return h;
}

bool FitsNode(const v1::JobSpec& spec, const WorkerCapacity& w) {
  const NodeHold need = NodeNeeds(spec, w);
  if (need.slots <= 0 || w.free_slots < need.slots || w.FreeGpus() < need.gpus) return false;
  if (need.cpus > 0 && w.free_cpus >= 0 && w.free_cpus < need.cpus) return false;
  if (need.memory > 0 && w.free_memory >= 0 && w.free_memory < need.memory) return false;
  for (const auto& [key, value] : spec.node_selector()) {
    if (w.labels == nullptr) return false;
    auto it = w.labels->find(key);
    if (it == w.labels->end() || it->second != value) return false;
  }
  return true;
}

void Apply(const NodeHold& hold, WorkerCapacity& w, int sign) {
  w.free_slots -= sign * hold.slots;
  if (hold.gpus != 0) w.free_gpus = w.FreeGpus() - sign * hold.gpus;
  if (w.free_cpus >= 0) w.free_cpus -= sign * hold.cpus;
  if (w.free_memory >= 0) w.free_memory -= sign * hold.memory;
}

namespace {

std::optional<std::vector<std::string>> PlaceGangAmong(const v1::JobSpec& spec,
                                                       const std::vector<WorkerCapacity>& workers,
                                                       const std::vector<std::string>& preferred,
                                                       const std::vector<std::string>& avoid) {
  const int min_nodes = MinNodes(spec), max_nodes = MaxNodes(spec);
  if (min_nodes <= 0 || max_nodes < min_nodes) return std::nullopt;
  auto fits = [&spec](const WorkerCapacity& w) { return FitsNode(spec, w); };
  // O(workers + preferred), then a partial sort of the rest: a restart of a 10,000-node job
  // on 10,000 workers must not compare every preferred name with every worker.
  std::vector<const WorkerCapacity*> ordered;
  std::unordered_set<std::string> taken(avoid.begin(), avoid.end());  // avoided: last
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
  std::vector<const WorkerCapacity*> avoided;
  const std::unordered_set<std::string> avoid_set(avoid.begin(), avoid.end());
  for (const WorkerCapacity& w : workers) {
    if (!fits(w)) continue;
    if (avoid_set.count(w.name) != 0) {
      avoided.push_back(&w);
    } else if (taken.count(w.name) == 0) {
      rest.push_back(&w);
    }
  }
  // The avoided workers come after every other, by name; only as many as the gang's least
  // size needs (an elastic job does not grow onto them).
  std::sort(avoided.begin(), avoided.end(),
            [](const WorkerCapacity* a, const WorkerCapacity* b) { return a->name < b->name; });
  const size_t others = ordered.size() + rest.size();
  if (others + avoided.size() < static_cast<size_t>(min_nodes)) return std::nullopt;
  const size_t nodes = others >= static_cast<size_t>(min_nodes)
                           ? std::min(others, static_cast<size_t>(max_nodes))
                           : static_cast<size_t>(min_nodes);
  const size_t need = std::min(nodes, others) - std::min(ordered.size(), nodes);
  std::partial_sort(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(need), rest.end(),
                    [](const WorkerCapacity* a, const WorkerCapacity* b) {
                      if (a->free_slots != b->free_slots) return a->free_slots > b->free_slots;
                      return a->name < b->name;
                    });
  ordered.insert(ordered.end(), rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(need));
  for (size_t i = 0; ordered.size() < nodes && i < avoided.size(); ++i) {
    ordered.push_back(avoided[i]);
  }
  std::vector<std::string> chosen;
  chosen.reserve(nodes);
  for (size_t i = 0; i < nodes; ++i) chosen.push_back(ordered[i]->name);
  return chosen;
}

}  // namespace

std::optional<std::vector<std::string>> PlaceGang(const v1::JobSpec& spec,
                                                  const std::vector<WorkerCapacity>& workers,
                                                  const std::vector<std::string>& preferred,
                                                  const std::vector<std::string>& avoid) {
  if (!spec.procs_per_node_gpu()) return PlaceGangAmong(spec, workers, preferred, avoid);
  // One process per GPU: every node of the gang must run the same number of processes, or
  // the ranks of a 4-GPU and a 2-GPU node would not make one world. Try the GPU counts that
  // some fitting worker has: the preferred workers' first (a restart keeps its shape), then
  // the most processes per node.
  std::vector<int> counts;
  for (const std::string& name : preferred) {
    for (const WorkerCapacity& w : workers) {
      if (w.name == name && ProcsPerNode(spec, w.gpus) > 0 &&
          std::find(counts.begin(), counts.end(), w.gpus) == counts.end()) {
        counts.push_back(w.gpus);
      }
    }
    if (!counts.empty()) break;
  }
  std::vector<int> others;
  for (const WorkerCapacity& w : workers) {
    if (FitsNode(spec, w) && std::find(counts.begin(), counts.end(), w.gpus) == counts.end() &&
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
    if (auto chosen = PlaceGangAmong(spec, same, preferred, avoid)) return chosen;
  }
  return std::nullopt;
}

namespace {

// "1.5 GiB", "512 MiB": what a node of a spec asks for, for messages.
std::string Bytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n);
  size_t u = 0;
  while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), v == static_cast<int64_t>(v) ? "%.0f %s" : "%.1f %s", v,
                units[u]);
  return buf;
}

}  // namespace

std::string WhyNoFit(const v1::JobSpec& spec, const std::vector<WorkerCapacity>& capacity) {
  int fit = 0, min_procs = -1, max_procs = 0;
  for (const WorkerCapacity& w : capacity) {
    const int procs = ProcsPerNode(spec, w.gpus);
    if (FitsNode(spec, w)) ++fit;
    if (procs > 0) {
      min_procs = min_procs < 0 ? procs : std::min(min_procs, procs);
      max_procs = std::max(max_procs, procs);
    }
  }
  // What one node needs, per process count.
  auto times = [](int per_proc, const std::string& what) {
    return std::to_string(per_proc) + " " + what;
  };
  std::vector<std::string> parts;
  if (spec.procs_per_node_gpu()) {
    const int gpp = GpusPerProc(spec);
    // How many processes a node would run: the range over the workers that have enough
    // GPUs for one, or none of them.
    std::string procs = " (no worker has enough)";
    if (min_procs > 0) {
      procs = " (" + std::to_string(min_procs) +
              (max_procs != min_procs ? "-" + std::to_string(max_procs) : "") + " per node)";
    }
    parts.push_back((gpp == 1 ? std::string("a GPU") : std::to_string(gpp) + " GPUs") +
                    " per process" + procs);
  } else {
    const int procs = spec.procs_per_node();
    parts.push_back(times(procs, procs == 1 ? "free slot" : "free slots"));
    if (GpusPerProc(spec) > 0) {
      parts.push_back(times(procs * GpusPerProc(spec),
                            "free GPU" + std::string(procs * GpusPerProc(spec) == 1 ? "" : "s")));
    }
  }
  if (spec.cpus_per_proc() > 0) {
    const std::string n = spec.procs_per_node_gpu()
                              ? std::to_string(spec.cpus_per_proc()) + " per process"
                              : std::to_string(spec.cpus_per_proc() * spec.procs_per_node());
    parts.push_back(n + " free cores");
  }
  if (spec.memory_per_proc_bytes() > 0) {
    parts.push_back(spec.procs_per_node_gpu()
                        ? Bytes(spec.memory_per_proc_bytes()) + " per process"
                        : Bytes(spec.memory_per_proc_bytes() * spec.procs_per_node()) + " free");
  }
  if (!spec.node_selector().empty()) {
    std::map<std::string, std::string> sorted(spec.node_selector().begin(),
                                              spec.node_selector().end());
    std::string labels;
    for (const auto& [k, v] : sorted) labels += (labels.empty() ? "" : ",") + k + "=" + v;
    parts.push_back("labels " + labels);
  }
  std::string needs;
  for (size_t i = 0; i < parts.size(); ++i) {
    needs += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  }
  const int lo = MinNodes(spec), hi = MaxNodes(spec);
  const std::string count =
      lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
  if (static_cast<int>(capacity.size()) < lo) {
    return "needs " + count + " workers with " + needs + "; " + std::to_string(capacity.size()) +
           " ready worker" + (capacity.size() == 1 ? " is" : "s are") + " taking jobs";
  }
  return "needs " + count + " worker" + (hi == 1 ? "" : "s") + " with " + needs + "; " +
         std::to_string(fit) + (fit == 1 ? " has" : " have") + " them now";
}

SchedulePlan FifoScheduler::Plan(const std::vector<WaitingJob>& waiting,
                                 std::vector<WorkerCapacity> capacity,
                                 const ScheduleContext& context) const {
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < capacity.size(); ++i) by_name[capacity[i].name] = i;
  SchedulePlan plan;
  for (const WaitingJob& job : waiting) {
    auto chosen = PlaceGang(*job.spec, capacity, job.preferred, job.avoid);
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
      Apply(NodeNeeds(*job.spec, w), w, 1);
    }
    plan.placements.push_back({job.id, std::move(*chosen)});
  }
  return plan;
}

}  // namespace convoy

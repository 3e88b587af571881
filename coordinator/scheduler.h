// Gang placement: all of a job's nodes or none. Pure logic, no clock, no I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"

namespace convoy {

// What the scheduler needs to know of one worker that can take work now.
struct WorkerCapacity {
  std::string name;
  int free_slots = 0;
  int gpus = 0;
};

// Processes one node of `spec` runs on a worker with `gpus` GPUs (procs_per_node, or the
// GPU count for `procs_per_node: gpu`).
int ProcsPerNode(const v1::JobSpec& spec, int gpus);

// Chooses spec.nodes() distinct workers, each with room for its processes, or nothing.
// Workers named in `preferred` (the previous attempt's, in node order) come first and keep
// their order, so that a restart lands where its checkpoint is; the rest follow by most
// free slots, then by name. Returns the chosen names in node order (node 0 first).
std::optional<std::vector<std::string>> PlaceGang(const v1::JobSpec& spec,
                                                  const std::vector<WorkerCapacity>& workers,
                                                  const std::vector<std::string>& preferred);

// One job that waits to be placed.
struct WaitingJob {
  std::string id;
  const v1::JobSpec* spec = nullptr;
  // The previous attempt's workers, node 0 first (a restart lands where its checkpoint is).
  std::vector<std::string> preferred;
};

// A decision: start job `id` on `workers` (node 0 first).
struct Placement {
  std::string id;
  std::vector<std::string> workers;
};

// The scheduling seam: which waiting jobs start now, and where. The JobManager calls it at
// most once per tick, when something changed (a job arrived, slots were freed, a worker became
// ready), with the jobs that wait in submission order and the READY workers' free slots; the
// jobs it leaves out keep waiting. Implementations are pure (no clock, no I/O).
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::vector<Placement> Schedule(const std::vector<WaitingJob>& waiting,
                                          std::vector<WorkerCapacity> capacity) const = 0;
};

// First in, first out, with backfill: in submission order, each job whose whole gang fits is
// placed (PlaceGang) and takes its slots; one that does not fit waits without holding back
// later, smaller jobs (no reservation: a large job can starve; priorities are another
// Scheduler's business).
class FifoScheduler : public Scheduler {
 public:
  std::vector<Placement> Schedule(const std::vector<WaitingJob>& waiting,
                                  std::vector<WorkerCapacity> capacity) const override;
};

}  // namespace convoy

// Gang placement: all of a job's nodes or none. Pure logic, no clock, no I/O.
#pragma once

#include <cstdint>
#include <map>
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

// Chooses spec.nodes() distinct workers, each with room for its processes, or nothing. With
// `procs_per_node: gpu` every chosen worker has the same number of GPUs (so every node runs
// the same number of processes: one world of nodes × procs ranks).
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
  std::string owner;
  int64_t submitted_ms = 0;      // unix ms; the queue's last tie-break (ids sort the same)
  int64_t waiting_since_ms = 0;  // unix ms; ageing counts from it
};

// One job that holds slots now.
struct RunningJob {
  std::string id;
  std::string owner;
  int priority = 0;
  // When its attempt will have ended at the latest (started + max_runtime), unix ms; 0 when
  // it has no max_runtime (no end can be promised).
  int64_t ends_by_ms = 0;
  std::vector<std::pair<std::string, int>> slots;  // worker, processes there
};

// What a scheduling pass may know besides the queue and the free slots.
struct ScheduleContext {
  int64_t now_ms = 0;  // unix ms
  std::vector<RunningJob> running;
  // Each owner's recent use of the cluster (slot-seconds, decayed), for fair share.
  std::map<std::string, double> usage;
};

// A decision: start job `id` on `workers` (node 0 first).
struct Placement {
  std::string id;
  std::vector<std::string> workers;
};

// Where a job that keeps waiting stands, and why.
struct QueueEntry {
  std::string id;
  int position = 0;  // 1: the next to start
  int effective_priority = 0;
  std::string reason;
  int64_t estimated_start_ms = 0;  // 0: none can be given
};

struct SchedulePlan {
  std::vector<Placement> placements;
  std::vector<QueueEntry> queue;  // the jobs left waiting, in the order they will start
};

// The scheduling seam: which waiting jobs start now, and where, and why the others wait. The
// JobManager calls it when something changed (a job arrived, slots were freed, a worker became
// ready) and every few seconds while jobs wait, with the jobs that wait in submission order
// and the READY workers' free slots; the jobs it leaves out keep waiting. Implementations
// are pure (no clock but the context's, no I/O).
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual SchedulePlan Plan(const std::vector<WaitingJob>& waiting,
                            std::vector<WorkerCapacity> capacity,
                            const ScheduleContext& context) const = 0;
  // The placements of Plan with an empty context.
  std::vector<Placement> Schedule(const std::vector<WaitingJob>& waiting,
                                  std::vector<WorkerCapacity> capacity) const {
    return Plan(waiting, std::move(capacity), {}).placements;
  }
};

// First in, first out, with backfill: in submission order, each job whose whole gang fits is
// placed (PlaceGang) and takes its slots; one that does not fit waits without holding back
// later, smaller jobs (no reservation: a large job can starve). `--scheduler fifo`.
class FifoScheduler : public Scheduler {
 public:
  SchedulePlan Plan(const std::vector<WaitingJob>& waiting, std::vector<WorkerCapacity> capacity,
                    const ScheduleContext& context) const override;
};

// Why `spec` does not fit `capacity` now, in words: "needs 4 workers with 2 free slots; 3
// have them now".
std::string WhyNoFit(const v1::JobSpec& spec, const std::vector<WorkerCapacity>& capacity);

}  // namespace convoy

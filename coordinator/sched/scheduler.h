// Gang placement: all of a job's nodes or none. Pure logic, no clock, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"
#include "spec/job_spec_validation.h"

namespace convoy {

// What the scheduler needs to know of one worker that can take work now.
struct WorkerCapacity {
  std::string name;
  int free_slots = 0;
  int gpus = 0;  // the worker's GPUs (`procs_per_node: gpu` runs one process per gpus_per_proc)
  // What ranks have not asked for yet: GPUs (-1: all of `gpus`), cores and bytes of memory
  // (-1: not known, not checked: a worker that reports none).
  int free_gpus = -1;
  int free_cpus = -1;
  int64_t free_memory = -1;
  // The worker's --label pairs, matched against a spec's node_selector; null: none. Points
  // into the registry's WorkerInfo, valid for the scheduling pass.
  const google::protobuf::Map<std::string, std::string>* labels = nullptr;

  int FreeGpus() const { return free_gpus < 0 ? gpus : free_gpus; }
};

// Processes one node of `spec` runs on a worker with `gpus` GPUs (procs_per_node, or for
// `procs_per_node: gpu` one per GPUsPerProc GPUs).
int ProcsPerNode(const v1::JobSpec& spec, int gpus);
// GPUs each process of `spec` gets: gpus_per_proc, or 1 with `procs_per_node: gpu`.
int GpusPerProc(const v1::JobSpec& spec);

// What one node of `spec` holds on a worker.
struct NodeHold {
  std::string worker;
  int slots = 0;  // processes
  int gpus = 0;
  int cpus = 0;
  int64_t memory = 0;
};
// What a node of `spec` would hold on `w` (slots 0 when `spec` runs nothing there).
NodeHold NodeNeeds(const v1::JobSpec& spec, const WorkerCapacity& w);
// Whether one node of `spec` fits `w` now: its processes, their GPUs, cores and memory, and
// the node_selector.
bool FitsNode(const v1::JobSpec& spec, const WorkerCapacity& w);
// Takes (sign 1) or gives back (sign -1) what `hold` holds on `w`.
void Apply(const NodeHold& hold, WorkerCapacity& w, int sign);

// Chooses distinct workers for the nodes of `spec`, each with room for its processes and
// their resources, or nothing: exactly spec.nodes(), or for an elastic job as many as fit
// between min_nodes and max_nodes. With `procs_per_node: gpu` every chosen worker has the same
// number of GPUs (so every node runs the same number of processes: one world of nodes ×
// procs ranks).
// Workers named in `preferred` (the previous attempt's, in node order) come first and keep
// their order, so that a restart lands where its checkpoint is; the rest follow by most
// free slots, then by name. Workers named in `avoid` (a node the job's last attempt failed
// on for the node's reasons, a hang's suspect, a replaced straggler's) come last, preferred
// or not: they are chosen only when the others do not fit. Returns the chosen names in node
// order (node 0 first).
std::optional<std::vector<std::string>> PlaceGang(const v1::JobSpec& spec,
                                                  const std::vector<WorkerCapacity>& workers,
                                                  const std::vector<std::string>& preferred,
                                                  const std::vector<std::string>& avoid = {});

// One job that waits to be placed.
struct WaitingJob {
  std::string id;
  const v1::JobSpec* spec = nullptr;
  // The previous attempt's workers, node 0 first (a restart lands where its checkpoint is).
  std::vector<std::string> preferred;
  // Workers to place on only when no others fit (PlaceGang).
  std::vector<std::string> avoid;
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
  std::vector<NodeHold> slots = {};  // what it holds on each worker
  // A job of higher priority may preempt it (JobSpec.preemptible, or its default).
  bool preemptible = false;
  int64_t started_ms = 0;  // its attempt's placement, unix ms (the youngest is preempted first)
  // Its ranks are already being stopped (preempted, failed, cancelled): its slots come back
  // now, and it is never chosen as a victim again.
  bool stopping = false;
};

// Quotas of one owner (0: no limit), from the coordinator's --max-slots-per-user and its
// --quota rules for the owner's role and name.
struct Quota {
  int slots = 0;   // processes their running jobs may have at once
  int gpus = 0;    // GPUs their running jobs may hold at once
  int queued = 0;  // jobs they may have waiting (enforced at submit)
  // Where each limit comes from, for messages: "--max-slots-per-user", "--quota user:alice",
  // "--quota role:user".
  std::string source;  // of slots
  std::string gpus_source;
  std::string queued_source;
};

// What a scheduling pass may know besides the queue and the free slots.
struct ScheduleContext {
  int64_t now_ms = 0;  // unix ms
  std::vector<RunningJob> running;
  // Each owner's recent use of the cluster (slot-seconds, decayed), for fair share.
  std::map<std::string, double> usage;
  // Each owner's quota; owners absent have none.
  std::map<std::string, Quota> quotas;
};

// A decision to stop a running job for a waiting one of higher priority.
struct Preemption {
  std::string victim;
  std::string for_job;
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
  // Running jobs to stop (their ranks checkpoint and exit; they wait again) so that a waiting
  // job of higher priority fits.
  std::vector<Preemption> preemptions;
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
// have them now", "needs 2 to 3 workers with 2 free slots, 4 free GPUs and labels zone=a; 1
// has them now".
std::string WhyNoFit(const v1::JobSpec& spec, const std::vector<WorkerCapacity>& capacity);

}  // namespace convoy

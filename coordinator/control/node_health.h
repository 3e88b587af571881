// When nodes are sick (README): the coordinator's side of the health gate and of faults
// that follow the node. One of the JobManager's controllers.
//   - Health gate: each worker says how its checks went (Register, every Heartbeat); the
//     registry keeps it, and placement skips a worker that is not healthy (TakesNewRanks,
//     coordinator/state/worker_registry.h). A worker that is healthy again is placed on at
//     the next pass.
//   - Faults follow the node: every decided failure whose origin is the node's (see
//     coordinator/state/fault_origin.h) is recorded against the node (NodeFaultTracker);
//     when ranks of different jobs failed there within the window, the node is cordoned
//     with that reason (an event of the job whose failure did it, a log line, a counter).
//   - Cordons, by the coordinator or an admin (CordonWorker), persisted with the worker; an
//     uncordon clears the node's record.
//
// Threading: none of its own; called with the Coordinator's lock held.
// Cost: O(log workers) per health report; O(faults of the node) per failure.
#pragma once

#include <functional>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "convoy/v1/job.pb.h"
#include "coordinator/control/job_stats.h"
#include "coordinator/control/job_writer.h"
#include "coordinator/state/job_table.h"
#include "coordinator/state/node_faults.h"
#include "coordinator/state/worker_registry.h"
#include "coordinator/store/job_store.h"

namespace convoy {

class NodeHealth {
 public:
  // `on_capacity`: a worker may take new ranks again (a scheduling pass is due).
  NodeHealth(const Clock& clock, NodeFaultTracker::Options options, JobStore& store,
             WorkerRegistry& workers, JobWriter& writer, JobStats& stats,
             std::function<void()> on_capacity)
      : faults_(clock, options),
        store_(store),
        workers_(workers),
        writer_(writer),
        stats_(stats),
        on_capacity_(std::move(on_capacity)) {}

  // `worker` registered (the registry already holds its health): says so when it is not
  // healthy.
  void OnRegistered(const std::string& worker);
  // A heartbeat's health: kept; when whether it takes new ranks changed, logged, and a pass
  // is due when it takes them again.
  void OnHealth(const std::string& worker, const v1::WorkerHealth& health);
  // A decided failure of `r`'s attempt (AttemptLifecycle's fault hook): a node's fault is
  // recorded, and may cordon the node.
  void OnFailure(JobRecord& r, const v1::RankFailure& cause);
  // Cordons or uncordons `worker` (CordonWorker; `by`: who, "coordinator" when automatic),
  // persisted. Uncordoning clears its faults and lets waiting jobs be placed on it.
  // NOT_FOUND for a worker never seen; UNAVAILABLE when it could not be persisted.
  StatusOr<v1::WorkerInfo> SetCordoned(const std::string& worker, bool cordoned,
                                       const std::string& reason, const std::string& by);
  // Adds the node's faults within the window to `w` (ListWorkers).
  void Describe(v1::WorkerInfo& w) const;

 private:
  NodeFaultTracker faults_;
  JobStore& store_;
  WorkerRegistry& workers_;
  JobWriter& writer_;
  JobStats& stats_;
  const std::function<void()> on_capacity_;
};

}  // namespace convoy

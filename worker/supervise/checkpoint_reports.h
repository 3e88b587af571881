// The supervisor's side of checkpoints kept by policy (README "Checkpoints kept by policy"):
// a "checkpoint" record of an attempt whose job has a `checkpoint:` policy goes to the
// CheckpointKeeper (worker/files/checkpoint_keeper.h) on the files thread, which keeps what
// the policy keeps and deletes the rest there, off the loop; what the job keeps then goes to
// the coordinator as CheckpointsKept, sent from the loop. When the worker starts, the keeper
// finishes the deletions an earlier run was killed in the middle of; after each registration
// every job it holds checkpoints of is reported again (the coordinator replaces what it knew
// of this worker's).
//
// Threading: the supervisor thread; the keeper only on the files thread.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "convoy/v1/worker.pb.h"
#include "worker/files/checkpoint_keeper.h"
#include "worker/host/attempt_key.h"
#include "worker/supervise/attempt_table.h"
#include "worker/supervise/off_loop.h"
#include "worker/supervise/reporter.h"
#include "worker/supervise/worker_config.h"

namespace convoy {

class CheckpointReports {
 public:
  // Runs `then` on the supervisor thread, as a command (Supervisor::ToLoop).
  using ToLoop = std::function<void(std::function<void()> then)>;

  CheckpointReports(const WorkerConfig& config, AttemptTable& table, Reporter& reporter,
                    OffLoop& files_thread, ToLoop to_loop);

  // Queues the recovery of interrupted deletions on the files thread. Call once, after the
  // files thread started.
  void Start();
  // A metric record of attempt `key`: a "checkpoint" record of a job with a policy is kept
  // (or not) by it; others are ignored.
  void OnRecord(const AttemptKey& key, const v1::MetricRecord& rec);
  // The link was resynchronised: every job's checkpoints are reported again.
  void Resync();

 private:
  void Send(const std::vector<v1::CheckpointsKept>& kept);

  AttemptTable& table_;
  Reporter& reporter_;
  OffLoop& files_thread_;
  const ToLoop to_loop_;
  // Files thread only (shared with the tasks it runs; outlives them: the thread stops first).
  std::shared_ptr<CheckpointKeeper> keeper_;
};

}  // namespace convoy

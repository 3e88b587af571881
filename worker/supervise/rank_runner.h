// The running ranks' lifecycle: starts the ranks of a prepared launch (the attempt's directory,
// its metrics socket, snapshot directory, each rank's log, error file, cgroup and
// environment), pumps their output into their logs, reaps them and reports their exits, and
// kills attempts (SIGTERM to each process group, SIGKILL after the grace; a preempting kill
// writes the attempt's preempt file first). A rank's cgroup is emptied and removed on the
// cgroups thread (worker/supervise/off_loop.h), never on the loop: Cgroup::KillAll may poll
// for a second.
//
// Threading: the supervisor thread (every fork happens there: PR_SET_PDEATHSIG is tied to
// it), except log_bytes_total (any thread).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "convoy/v1/worker.pb.h"
#include "worker/exec/process_launcher.h"
#include "worker/exec/rank_env.h"
#include "worker/supervise/attempt_table.h"
#include "worker/supervise/launch_plan.h"
#include "worker/supervise/metrics_relay.h"
#include "worker/supervise/off_loop.h"
#include "worker/supervise/reporter.h"
#include "worker/supervise/worker_config.h"

namespace convoy {

class RankRunner {
 public:
  // `cgroups_thread` empties and removes the ranks' cgroups.
  RankRunner(const WorkerConfig& config, ProcessLauncher& launcher, AttemptTable& table,
             Reporter& reporter, MetricsRelay& metrics, OffLoop& cgroups_thread,
             const Clock& clock);
  // Removes the metrics socket fallback directory, if one was made.
  ~RankRunner();
  RankRunner(const RankRunner&) = delete;
  RankRunner& operator=(const RankRunner&) = delete;

  // Starts every rank of `plan`: each start (ProcessStarted) or failure (LaunchFailed) is
  // reported; the attempt is in the table afterwards either way.
  void Start(const LaunchPlan& plan);
  // Moves what the rank wrote to its stdout or stderr into its log (bounded per call).
  void Pump(Rank& r, bool is_stderr);
  // Reaps the ranks that ended and reports their exits.
  void Reap();

  // SIGTERM to every running rank of `a` (SIGCONT too), SIGKILL `grace_ms` later.
  void Kill(Attempt& a, int64_t grace_ms);
  // Kill with the worker's grace, for every attempt; `why` is logged when any ran.
  void KillEverything(const std::string& why);
  // SIGKILL to the ranks past their grace at `now` (again a second later while they stay).
  void KillOverdue(int64_t now);
  // When the first SIGKILL is due (kNever: none).
  int64_t NextKillMs() const;
  // Writes the attempt's CONVOY_PREEMPT_FILE (its ranks are asked to save and stop).
  void WritePreemptFile(const Attempt& a, const std::string& reason);
  // The running ranks that are stopped (SIGSTOP, a tracer), for the heartbeat.
  std::vector<v1::StoppedRank> StoppedRanks();

  // Rank output written to the logs since the worker started. Any thread.
  int64_t log_bytes_total() const { return log_bytes_total_.load(std::memory_order_relaxed); }

 private:
  // Makes the attempt's directory (0711 when its ranks run as another user) and the attempt
  // in the table with its metrics socket and snapshot directory. Null, refused, when the
  // directory cannot be made.
  Attempt* AddAttempt(const LaunchPlan& plan);
  // What every rank of the attempt shares: its files and the data cache.
  RankFiles SharedFiles(const LaunchPlan& plan, const Attempt& a);
  // Starts local rank `l` of `plan` into `a`, and reports it.
  void StartRank(const LaunchPlan& plan, Attempt& a, int l, const RankFiles& shared);
  void OnExit(Attempt& a, Rank& r, int wait_status);
  // With cgroups, makes the rank's group `name` (its job's `resources` and --pids-per-rank)
  // and sets `req`'s join files, given to `user`; the error when it cannot. Nothing without.
  Status PrepareRankCgroup(Rank& r, const std::string& name, const v1::RankResources& resources,
                           const std::optional<RunAsUser>& user, const std::string& label,
                           LaunchRequest* req);
  // Hands the rank's cgroup to the cgroups thread, which kills what is left in it and removes
  // it (a rank that ended, or that could not start).
  void RemoveCgroup(Rank& r, const std::string& label);

  const WorkerConfig& config_;
  ProcessLauncher& launcher_;
  AttemptTable& table_;
  Reporter& reporter_;
  MetricsRelay& metrics_;
  OffLoop& cgroups_thread_;
  const Clock& clock_;
  // Made (mkdtemp) when a metrics socket path is too long for the work dir.
  std::string socket_fallback_dir_;
  std::atomic<int64_t> log_bytes_total_{0};
};

}  // namespace convoy

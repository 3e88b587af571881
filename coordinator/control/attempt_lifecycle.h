// The attempt lifecycle: an attempt of a job from its placement on workers, through the
// rendezvous (node 0 reserves the master port, every node is sent its Launch) and its run, to
// its teardown (ranks killed or gone, resources given back). It follows what workers report
// of ranks (started, exited, could not start, stopped, vanished with a worker), attributes a
// failed attempt's root cause over the failure window, and decides restart, resize or
// failure. One of the JobManager's controllers.
//
// Every decision goes through the JobWriter (durable before any message acting on it); the
// table's attempt indexes (JobTable::Attach/Detach) and the capacity ledger change here only.
//
// Size: about 28 methods, over the house guide's 25: one entry point per worker report and
// decision of the one attempt state machine, and the steps they share (MarkGone,
// ReportFailure, SendKill, MaybeFinishTeardown). Split further, those steps would be shared
// across classes.
//
// Threading: none of its own; called with the Coordinator's lock held.
// Cost: a worker event is O(the ranks it names); Check is O(1) unless a deadline or a hang
// check is due (FailureAttribution); nothing is O(N^2) in a job's nodes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "convoy/v1/worker.pb.h"
#include "coordinator/control/job_stats.h"
#include "coordinator/control/job_writer.h"
#include "coordinator/control/worker_channel.h"
#include "coordinator/sched/capacity_ledger.h"
#include "coordinator/state/job_table.h"
#include "coordinator/state/worker_registry.h"

namespace convoy {

class AttemptLifecycle {
 public:
  struct Options {
    // SIGTERM-to-SIGKILL grace given to workers when an attempt is torn down. Training ranks
    // die on SIGTERM at once; the grace is for user scripts that save state on SIGTERM.
    int64_t kill_grace_ms = 3000;
    // After a Kill, ranks not reported gone within grace + this are assumed gone (their worker
    // will be declared lost if it really is unreachable).
    int64_t teardown_slack_ms = 10000;
    // From placement until every rank has started.
    int64_t rendezvous_timeout_ms = 60000;
    // How long failures of one attempt are collected before the root cause is chosen: a rank
    // killed by a signal makes its peers fail within milliseconds, in either order of arrival.
    int64_t failure_window_ms = 300;
    // Preemption (README "Sharing a cluster"): SIGTERM-to-SIGKILL grace given to the ranks of a
    // preempted (or resized, or drained --now) attempt to write their checkpoint and exit.
    int64_t preempt_grace_ms = 30000;
    // The cluster's id (coordinator/store/cluster_id.h), sent in every Launch with the job's uid;
    // empty in tests that do not care.
    std::string cluster_id;
  };

  // `on_released`: an attempt gave its resources back (waiting jobs may fit now).
  AttemptLifecycle(const Clock& clock, Options options, JobTable& table, CapacityLedger& ledger,
                   JobStats& stats, JobWriter& writer, const WorkerRegistry& workers,
                   WorkerChannel& channel, std::function<void()> on_released)
      : clock_(clock),
        options_(std::move(options)),
        table_(table),
        ledger_(ledger),
        stats_(stats),
        writer_(writer),
        workers_(workers),
        channel_(channel),
        on_released_(std::move(on_released)) {}

  // An empty runtime (no attempt) with this clock and failure window.
  AttemptRuntime NewRuntime() const;
  // The job's current attempt in its record; null when it has none.
  static v1::Attempt* CurrentAttempt(JobRecord& r);

  // ---- Placement and restore
  // Starts a new attempt of `r` on `workers` (node 0 first): SCHEDULED, its resources taken,
  // then RENDEZVOUS and ReservePort to node 0. False when its placement could not be
  // persisted (nothing changed).
  bool Place(JobRecord& r, const std::vector<std::string>& workers);
  // Installs an attempt restored after a coordinator restart (its ranks' resources taken).
  void Restore(JobRecord& r, AttemptRuntime rt);

  // ---- What workers report (the worker's name from its stream)
  void OnPortReserved(const std::string& worker, const v1::PortReserved& msg);
  void OnProcessStarted(const std::string& worker, const v1::ProcessStarted& msg);
  void OnLaunchFailed(const std::string& worker, const v1::LaunchFailed& msg);
  void OnProcessExited(const std::string& worker, const v1::ProcessExited& msg);
  // Its ranks' liveness as the worker sees it (stopped processes are not hung).
  void OnHeartbeat(const std::string& worker, const v1::Heartbeat& heartbeat);
  // `worker` registered and reports `as`, of `r`'s current attempt: its running ranks are
  // adopted, and the exits it saw while the coordinator was away are taken as reported.
  void Adopt(JobRecord& r, const std::string& worker, const v1::AttemptStatus& as);
  // `worker` registered again and reports `reported` (null: nothing) of `r`'s current
  // attempt: a rank it no longer knows of vanished with the worker; a rendezvous cut short by
  // a coordinator restart is asked again.
  void OnWorkerBack(JobRecord& r, const std::string& worker, const v1::AttemptStatus* reported);
  // `worker` is lost: its ranks of `r`'s attempt are gone, and the attempt fails at once.
  void OnWorkerLost(JobRecord& r, const std::string& worker);

  // ---- Decisions
  // The deadlines of `r`'s attempt: the failure window, the rendezvous, a hang, the teardown.
  // From the tick.
  void Check(JobRecord& r);
  // The attempt failed with `cause`: RESTARTING (a restart, an elastic resize, or a move off
  // a node whose fault it was: coordinator/state/fault_origin.h) or FAILED, then its ranks
  // are killed. The cause's origin is attributed here; the next placement avoids the node of
  // a node's fault or a hang (JobRecord::avoid).
  void Fail(JobRecord& r, const v1::RankFailure& cause);
  // Asks the ranks of `r`'s attempt to checkpoint and stop (Kill with preempt): the job goes
  // back to PENDING, or for an elastic resize to RESTARTING; neither uses a restart. False
  // when it could not be persisted, or there is nothing to stop.
  // `kind`: "priority", "drain", "resize" or "straggler" (JobStats::preemptions); a resize
  // and a straggler's replacement go to RESTARTING, to be placed again at once.
  bool Preempt(JobRecord& r, const std::string& reason, const std::string& kind);
  // The job was stopped (cancelled, or over its max_runtime) after its transition: its ranks
  // are killed, and its resources given back once they are gone.
  void Stop(JobRecord& r, const std::string& reason);
  // Tells the workers that ran any attempt of `r` that the job finished (JobFinished).
  void SendJobFinished(const JobRecord& r) const;

  // When nodes are sick: called once an attempt's failure is decided (its cause attributed,
  // RankFailure.origin) and acted on; the JobManager records the node's faults there.
  using FaultHook = std::function<void(JobRecord& r, const v1::RankFailure& cause)>;
  void SetFaultHook(FaultHook hook) { on_fault_ = std::move(hook); }

 private:
  void Attach(JobRecord& r, AttemptRuntime rt);
  void Detach(JobRecord& r);
  void MarkStarted(AttemptRuntime& rt, RankRuntime& rr);
  void MarkGone(AttemptRuntime& rt, RankRuntime& rr);
  void MaybeRunning(JobRecord& r);
  void MaybeRendezvousAgain(JobRecord& r, const std::string& worker);
  // A failure observed now; the root cause is chosen when the failure window closes.
  void ReportFailure(JobRecord& r, v1::RankFailure failure);
  // Decides the failure window of `r`'s attempt when it can be (RootCause).
  void MaybeDecideFailure(JobRecord& r);
  // `preempt`: the ranks checkpoint and stop (Kill.preempt), with preempt_grace_ms.
  // A restart: the killed attempt's resources go to the next attempt at once (CPU ranks; see
  // the definition).
  void ReleaseForRestart(JobRecord& r);
  void SendKill(JobRecord& r, const std::string& reason, bool preempt = false);
  // Frees the attempt's resources once every rank is gone or the teardown deadline passed.
  void MaybeFinishTeardown(JobRecord& r);
  v1::RankFailure FailureFor(const JobRecord& r, int rank, const std::string& worker) const;

  const Clock& clock_;
  const Options options_;
  JobTable& table_;
  CapacityLedger& ledger_;
  JobStats& stats_;
  JobWriter& writer_;
  const WorkerRegistry& workers_;
  WorkerChannel& channel_;
  const std::function<void()> on_released_;
  FaultHook on_fault_;
};

}  // namespace convoy

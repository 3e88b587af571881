// The job registry's front: the one API the Coordinator calls (clients' requests, workers'
// messages, the tick), routed to the controllers that own each concern. It holds no state of
// its own beyond them:
//   - JobTable (job_table.h): the jobs and every index over them;
//   - JobWriter (job_writer.h): every durable change of a job's record;
//   - AttemptLifecycle (attempt_lifecycle.h): placement, rendezvous, run, failure
//     attribution, teardown and preemption of attempts;
//   - SchedulingController (scheduling.h): which waiting job starts where, quotas, fair
//     share, max_runtime, elastic growth;
//   - CapacityLedger (capacity_ledger.h): what ranks hold on each worker;
//   - WatchHub, JobStats, LogBroker: watchers, statistics, log requests;
//   - FileDeletions, IdentityPool, Retention: deleted jobs' files, job identities, retention;
//   - Dependencies (dependencies.h): jobs waiting for others (`after`), cancel --cascade.
//   - SweepController (sweeps.h): a sweep's trials, ASHA, its status and state.
// Its methods are that API (about 30, by the Coordinator's needs) and the routing between
// controllers; a concern with state of its own gets a controller, not methods here.
// Plain C++: it speaks to workers through WorkerChannel, to disk through JobStore, and reads
// time from Clock; no gRPC or SQLite types.
//
// Threading: not thread-safe. The owner (coordinator/control/coordinator.h) calls every method with
// its one state lock held. Callbacks given to Watch and RequestLogs are invoked with that
// lock held and must only enqueue.
//
// Persistence rule: every transition is written to the JobStore (with its event) before any
// message that acts on it is sent. When the write fails, the transition does not happen.
// (The Coordinator's store is write-behind: the write is queued, and the commit thread makes
// it durable before it sends any message decided after it.) Rank exits, metrics and slot
// releases only mark the job dirty; Tick() writes each dirty job once. A kill -9 of the
// coordinator can therefore lose the exits and metrics of the last tick (50 ms): recovery
// re-derives them, because each worker reports its attempts' ranks and exit statuses in
// Register, and OnRegister replays those exits.
//
// Cost: worker events (heartbeat, metrics, exit, register) are O(ranks of that worker) or
// O(records), never O(jobs ever run): finished attempts drop their rank runtime, and an
// index maps each worker to the jobs that hold it. Nothing is O(N^2) in a job's nodes:
// counters (started, gone) answer "all started / all gone", kills go once per worker, each
// launch is O(its ranks), placement is O(workers + nodes) (a 10,000-node job on 10,000
// workers places and launches in milliseconds). Scheduling runs once per Tick when something
// changed (a job arrived, slots were freed, a worker became ready); Submit places at once.
// A metric record also goes into the job's history (MetricHistory: O(1) amortised); a
// changed history is written apart from the job, at most once per history_save_interval_ms
// while the job runs and at once when it ends (with its final transition), so a kill -9 loses
// at most that interval of a running job's history and nothing of a finished one's.
// Tick is O(active jobs + workers that expire): a running attempt's ranks are scanned for a
// hang only when one can be due (FailureAttribution::CheckHang). GetStats is O(states).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "convoy/v1/job.pb.h"
#include "convoy/v1/worker.pb.h"
#include "coordinator/control/attempt_lifecycle.h"
#include "coordinator/control/dependencies.h"
#include "coordinator/control/file_deletions.h"
#include "coordinator/control/job_stats.h"
#include "coordinator/control/job_writer.h"
#include "coordinator/control/log_broker.h"
#include "coordinator/control/node_health.h"
#include "coordinator/control/progress_watch.h"
#include "coordinator/control/retention.h"
#include "coordinator/control/scheduling.h"
#include "coordinator/control/sweeps.h"
#include "coordinator/control/watch_hub.h"
#include "coordinator/control/worker_channel.h"
#include "coordinator/sched/capacity_ledger.h"
#include "coordinator/sched/quota.h"
#include "coordinator/sched/scheduler.h"
#include "coordinator/state/failure_attribution.h"
#include "coordinator/state/identity_pool.h"
#include "coordinator/state/job_table.h"
#include "coordinator/state/list_query.h"
#include "coordinator/state/metric_book.h"
#include "coordinator/state/metric_history.h"
#include "coordinator/state/worker_registry.h"
#include "coordinator/store/job_store.h"

namespace convoy {

struct JobManagerOptions {
  // An attempt's placement, rendezvous, failure attribution and teardown (kill grace,
  // timeouts, the failure window, preemption grace, the cluster id): AttemptLifecycle's own.
  AttemptLifecycle::Options lifecycle;
  // The scheduling pass: the policy, quotas, fair share, preemption, elastic growth.
  SchedulingController::Options scheduling;
  // Unanswered ReadLogs requests fail after this long.
  int64_t log_request_timeout_ms = 10000;
  // Sent to workers in RegisterAck.
  int32_t heartbeat_interval_ms = 1000;
  // A running job's changed metric history is written at most this often (a finished
  // job's at once). Each write is the whole history: up to MetricHistory::kPointsPerJob
  // points, about 40 bytes each.
  int64_t history_save_interval_ms = 2000;
  // A submit whose job would take its owner past their process or GPU quota: false waits
  // ("over quota"), true refuses it with RESOURCE_EXHAUSTED naming the quota. A job larger
  // than the quota itself is refused either way (it could never start).
  bool refuse_over_quota = false;
  // Retention (convoy-coordinator --job-retention): a finished job is deleted, as by
  // Delete, once it ended more than job_retention_ms ago, and beyond the newest
  // job_retention_count finished jobs (by when they ended). 0: no such limit (the library
  // default: keep everything; the coordinator's flag defaults to 30 days).
  int64_t job_retention_ms = 0;
  int64_t job_retention_count = 0;
  // When nodes are sick: the window and the number of distinct jobs whose node faults cordon
  // a worker (--node-fault-window, --node-fault-jobs).
  NodeFaultTracker::Options node_faults;
};

class JobManager {
 public:
  JobManager(const Clock& clock, JobStore& store, WorkerRegistry& workers, WorkerChannel& channel,
             JobManagerOptions options);

  // Loads jobs and workers from the store (after a restart). Jobs that held workers wait for
  // them to reconnect and report; workers get the usual timeout to come back.
  Status Recover();

  // ---- Client API
  // Validates `spec` (INVALID_ARGUMENT naming the field), persists the job as PENDING and
  // tries to place it. Returns the new job's id.
  // `owner`: who submitted it (the token's user; empty with --insecure), kept on the job.
  // `role`: the role of the submitter's token ("user", "admin"; empty with --insecure),
  // whose quota rules apply.
  // `request_id` (SubmitJobRequest.request_id): when the owner already has a job submitted
  // with it, that job's id, and nothing else happens (a retried submit); INVALID_ARGUMENT
  // naming it when it is not a valid name (IsValidName).
  StatusOr<std::string> Submit(const v1::JobSpec& spec, const std::string& owner = "",
                               const std::string& role = "", const std::string& request_id = "");
  // NOT_FOUND for an unknown id.
  StatusOr<v1::Job> Get(const std::string& id) const;
  // The job's metric history, ranks sorted by rank; NOT_FOUND for an unknown id. O(points).
  StatusOr<v1::JobMetrics> GetMetrics(const std::string& id) const;
  // Every job, oldest first. Without `full`, each is a summary (ListJobsRequest.full): no
  // event log, and each attempt without its nodes and exits (node_count/exit_count set).
  std::vector<v1::Job> List(bool full = true) const;
  // One page of the jobs that match `query`, oldest first (newest first with
  // query.newest_first), and the token of the next page
  // (empty when no matching job follows). O(jobs scanned): from the cursor to the first
  // match after the page.
  struct JobPage {
    std::vector<v1::Job> jobs;
    std::string next_page_token;
  };
  JobPage ListPage(const JobQuery& query) const;
  // Summaries of the jobs that are not finished, oldest first: O(active jobs), for the
  // metrics exporter.
  std::vector<v1::Job> ListActive() const;
  // The code archives (code_sha256) that jobs kept here name, finished ones included: what
  // the code store may not collect.
  std::set<std::string> ReferencedCode() const;

  // Counts kept as things change (O(1) to read): what the exporter and `convoy workers`
  // summarise.
  struct Stats {
    std::map<v1::JobState, int> jobs;        // every job, by state
    std::map<v1::WorkerState, int> workers;  // every known worker, by state
    int64_t slots_total = 0;                 // of READY workers
    int64_t slots_used = 0;                  // by ranks that are not gone
    // Every job by (owner, state); owner "" with --insecure.
    std::map<std::pair<std::string, v1::JobState>, int> jobs_by_owner;
    // Totals since this coordinator started (Prometheus counters).
    int64_t attempts_started = 0;  // attempts placed
    // Attempts that failed, and restarts, by cause: rank_exit (non-zero exit), signal,
    // worker_lost, hang, other (rendezvous timeout, launch failure, ...).
    std::map<std::string, int64_t> attempt_failures;
    std::map<std::string, int64_t> restarts;
    // Attempts whose ranks were asked to checkpoint and stop, by why: priority (preempted
    // by a job of higher priority), drain (drain --now), resize (an elastic job grew).
    std::map<std::string, int64_t> preemptions;
    // When nodes are sick: rank failures attributed to nodes, workers the coordinator
    // cordoned itself, stragglers named, hangs found by progress.
    int64_t node_faults = 0;
    int64_t auto_cordons = 0;
    int64_t stragglers_named = 0;
    int64_t progress_hangs = 0;
    // Bad steps every rank skipped (a loss or gradient norm not finite), rewinds after
    // trainer.max_bad_steps of them in a row.
    int64_t bad_steps = 0;
    int64_t rewinds = 0;
  };
  Stats GetStats() const;

  // How long a job spent in one phase (coordinator/control/job_stats.h).
  using Phase = JobStats::Phase;
  using Duration = JobStats::Duration;
  // Durations observed since the last call, oldest first; at most JobStats::kMaxQueued are
  // kept between calls (the oldest dropped). O(returned). For the metrics exporter.
  std::vector<Duration> TakeDurations() { return stats_.TakeDurations(); }
  // Summaries of the jobs that reached a terminal state since the last call (at most
  // JobStats::kMaxQueued kept between calls), so that the exporter sees each job's final
  // state and last metrics even when it finished between two exports. O(returned).
  std::vector<v1::Job> TakeFinished();
  // FAILED_PRECONDITION when the job already finished.
  // `by`: who cancels (recorded in the event); empty with --insecure.
  // `cascade` (cancel --cascade): first cancels the unfinished jobs of the same owner that
  // wait on it, in turn (Dependencies::CancelDependants).
  StatusOr<v1::Job> Cancel(const std::string& id, const std::string& reason,
                           const std::string& by = "", bool cascade = false);

  // Calls `fn` at once with the job's snapshot, then with every event, metric and new
  // snapshot; with done = true after the job reached a terminal state (no call follows).
  using WatchFn = WatchHub::WatchFn;
  StatusOr<uint64_t> Watch(const std::string& id, WatchFn fn);
  void Unwatch(uint64_t watch_id);

  // Asks the worker that runs `rank` of the job's attempt (`attempt` < 0: the latest) for its
  // log from `offset`. With `wait_ms` > 0 the worker holds the request until bytes arrive,
  // the rank exits or wait_ms passes (ReadLogs.wait_ms). `fn` gets the answer, or an error
  // when the worker is not connected or does not answer within wait_ms plus
  // log_request_timeout_ms. Returns the attempt asked for.
  using LogFn = std::function<void(const StatusOr<v1::LogData>& data)>;
  StatusOr<int> RequestLogs(const std::string& id, int rank, int attempt, int64_t offset,
                            int max_bytes, int wait_ms, LogFn fn);

  // Deletes a finished job for good (DeleteJob, and retention): its stored rows (job,
  // attempts, events, metric history) and its record in memory. Each worker that ran one of
  // its attempts is told to remove the job's files (DeleteJobFiles): now when connected,
  // else when it next registers. These pending removals are persisted
  // (JobStore::SaveFileDeletion) until the worker answers without error, and asked again
  // every FileDeletions::kRetryMs while it answers with one (an attempt of the job still runs
  // there). Returns those workers, by name. NOT_FOUND for an unknown id;
  // FAILED_PRECONDITION while the job is not finished, or while the ranks of its last
  // attempt are still being stopped. `by`: who deletes, for the log ("retention" or empty).
  StatusOr<std::vector<std::string>> Delete(const std::string& id, const std::string& by = "");
  // Pending file removals (worker, job id) not yet confirmed, by worker then job. O(them).
  std::vector<FileDeletion> PendingFileDeletions() const;

  // Every worker with its used slots and jobs.
  std::vector<v1::WorkerInfo> ListWorkers() const;
  // One page of workers by name, each with its used slots and jobs. O(log workers + page).
  struct WorkerPage {
    std::vector<v1::WorkerInfo> workers;
    std::string next_page_token;
  };
  WorkerPage ListWorkersPage(const WorkerQuery& query) const;

  // Drains (no new placements; its running attempts go on) or undrains a worker, persisted
  // with the worker; `by` is recorded (empty with --insecure). With `now`, every job with
  // ranks on the worker is preempted at once (its ranks checkpoint and stop; it waits again,
  // without using a restart, and is placed elsewhere). NOT_FOUND for a worker never seen.
  // Undraining lets waiting jobs be placed at the next tick.
  StatusOr<v1::WorkerInfo> SetDrained(const std::string& worker, bool drained,
                                      const std::string& by, bool now = false);
  // Cordons (with `reason`) or uncordons a worker, persisted with it (`convoy cordon`,
  // `convoy uncordon`; coordinator/control/node_health.h); `by` is recorded (empty with
  // --insecure). NOT_FOUND for a worker never seen.
  StatusOr<v1::WorkerInfo> SetCordoned(const std::string& worker, bool cordoned,
                                       const std::string& reason, const std::string& by);
  // Forgets a LOST worker for good (`convoy worker forget`): its record leaves the registry
  // and the store (so it stays gone after a restart), and its pending removals of deleted
  // jobs' files are dropped (returned, by job id). `by` is logged (empty with --insecure).
  // Its ranks were already failed and released when it was lost, so no attempt still counts
  // on it; an attempt being torn down that names it finishes as for any lost worker. A later
  // registration of the name is a new worker. NOT_FOUND for a worker never seen (or already
  // forgotten); FAILED_PRECONDITION naming it while it is `connected` (its stream is open, as
  // the caller knows) or READY, or UNREACHABLE (it may still come back).
  struct ForgottenWorker {
    v1::WorkerInfo worker;  // as ListWorkers last showed it
    std::vector<std::string> abandoned_file_deletions;
  };
  StatusOr<ForgottenWorker> ForgetWorker(const std::string& worker, const std::string& by,
                                         bool connected = false);

  // ---- Worker API (the worker's name comes from its stream's Register)
  // A worker (re)registered: reconciles the attempts it reports (adopts the current ones,
  // kills stale ones) and returns the acknowledgement to send first.
  v1::RegisterAck OnRegister(const v1::Register& reg);
  void OnWorkerMessage(const std::string& worker, const v1::WorkerMessage& msg);
  void OnDisconnect(const std::string& worker);
  // True when `worker` was declared lost (its ranks failed): it must register again before
  // anything it says counts.
  bool IsLost(const std::string& worker) const {
    const v1::WorkerInfo* w = workers_.Find(worker);
    return w != nullptr && w->state() == v1::WORKER_LOST;
  }

  // Advances timeouts: lost workers, hung attempts, rendezvous and teardown deadlines, the
  // failure window, log requests. Call it often (every 50-100 ms).
  void Tick();

 private:
  // After every transition (JobWriter's hook): a scheduling pass when the job now waits,
  // JobFinished to its workers when it ended.
  void OnTransition(JobRecord& r, v1::JobState from, v1::JobState to);
  static v1::Job Summary(const v1::Job& job);
  // Submit's work; `trial` (a sweep's trial: SweepController's submit hook) sets the job's
  // sweep fields before it is first written and returns what its submit event adds.
  StatusOr<std::string> Admit(const v1::JobSpec& spec, const std::string& owner,
                              const std::string& role, const std::string& request_id,
                              const std::function<std::string(v1::Job&)>& trial);
  // Cancels the unfinished job `id` with `reason` as the event's (a sweep's trials).
  Status StopJob(const std::string& id, const std::string& reason);

  // Fills `w` with what ranks use on it, and the jobs that hold it.
  void AddUse(v1::WorkerInfo& w) const;
  void OnMetrics(const std::string& worker, const v1::MetricBatch& batch);
  void OnLogData(const std::string& worker, const v1::LogData& msg);
  // ---- Deletion and retention (job_manager_cleanup.cc)
  void OnJobFilesDeleted(const std::string& worker, const v1::JobFilesDeleted& msg);
  // Deletes the finished jobs past the retention (coordinator/control/retention.h).
  void ApplyRetention();
  void OnWorkerLost(const std::string& worker);

  const Clock& clock_;
  JobStore& store_;
  WorkerRegistry& workers_;
  WorkerChannel& channel_;
  const JobManagerOptions options_;

  JobTable table_;         // the jobs and every index over them
  CapacityLedger ledger_;  // what the ranks not gone hold on each worker
  JobStats stats_;         // counters, phase durations, jobs finished since the last export
  // Job identities held: by every job, and by a deleted one until every worker has removed
  // its files (in memory: after a restart a worker that still holds a deleted job's files
  // refuses its uid to another job).
  IdentityPool identities_;
  // Frees the identity of the job with uid `job_uid` unless a worker still holds its files.
  void ReleaseIdentityOf(const std::string& job_uid);
  WatchHub watches_;
  LogBroker logs_;
  FileDeletions deletions_;  // deleted jobs' files that workers are yet to remove
  Retention retention_;
  JobWriter writer_;            // every durable change of a job's record
  AttemptLifecycle lifecycle_;  // placement, rendezvous, run and teardown of attempts
  SchedulingController sched_;  // which waiting job starts where; quotas, fair share
  NodeHealth health_;           // when nodes are sick: health gate, node faults, cordons
  ProgressWatch progress_;      // when nodes are sick: stragglers and hangs by progress
  Dependencies deps_;           // jobs waiting for others (`after`)
  SweepController sweeps_;      // sweeps: their trials, ASHA, their status
};

}  // namespace convoy

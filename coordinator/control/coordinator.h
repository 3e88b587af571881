// The coordinator's core and its clients' facade: it owns the state lock, the JobManager and
// the WorkerRegistry, and composes the mechanisms around them: the worker stream table
// (worker_streams.h), the group-commit pipeline (commit_pipeline.h) and the ticker
// (ticker.h). CoordinatorServer (the daemon's composition root, used by main.cc and the
// in-process test cluster) constructs it; the gRPC services (coordinator/rpc/) translate
// messages and call it. No gRPC types here.
//
// Threading: decisions under the lock, I/O after it.
//  - `mu_` (the state lock) guards JobManager, WorkerRegistry and the effects of the section
//    in progress. It is held only for in-memory work: JobManager writes into a
//    WriteBehindStore and sends through a StreamChannel that only record what to do
//    (`Effects`, section_effects.h).
//  - When a locked section ends, its effects join the commit pipeline, still under `mu_`, so
//    the queue is in decision order; the pipeline makes them durable in one transaction and
//    only then sends the messages and runs the deferred callbacks (unary replies, watch
//    updates, log data). So a transition is durable before any message acting on it leaves,
//    and a reply is sent only once what it reports is durable.
//  - Callbacks handed to the outside (watch updates, log data, replies) run on the commit
//    thread with no lock held; they must not block (they queue to a stream and return).
//  - Lock order: mu_, then the stream table's and the pipeline's own. Stream implementations
//    take their own lock inside Enqueue/Close and never call back into the Coordinator.
//  - A store that fails is retried, and one that keeps failing stops the coordinator
//    (crash-only): see commit_pipeline.h.
//  - Reads for clients (GetCommitted, ListPageCommitted) answer only with committed state:
//    when the commit thread still has changes to persist, the answer waits behind them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "convoy/v1/job.pb.h"
#include "convoy/v1/worker.pb.h"
#include "coordinator/control/commit_pipeline.h"
#include "coordinator/control/job_manager.h"
#include "coordinator/control/section_effects.h"
#include "coordinator/control/ticker.h"
#include "coordinator/control/worker_streams.h"
#include "coordinator/state/worker_registry.h"

namespace convoy {

struct CoordinatorOptions {
  JobManagerOptions jobs;
  // A worker not heard from for this long is lost.
  int64_t worker_timeout_ms = 10000;
  // How often the ticker advances timeouts (JobManager::Tick).
  int64_t tick_ms = 50;
  // How often `on_export` gets counts and active jobs.
  int64_t export_interval_ms = 1000;
  // False: no ticker thread (tests with a FakeClock call Tick()).
  bool run_ticker = true;
  // How long the durable store may keep failing before the coordinator gives up (real time
  // from the first failure of a batch); then `on_store_lost` runs with what to log, on the
  // commit thread, which then stops. Empty: log it as critical and exit 1.
  int64_t store_give_up_ms = 60000;
  std::function<void(const std::string& why)> on_store_lost;
};

// Not copyable (it holds the state lock).
//
// Size: 30 methods. The clients' API is as wide as the gRPC services that call it; each is a
// locked section that routes to the JobManager (itself a router over the controllers).
class Coordinator {
 public:
  // `store` is the durable store (SQLite in production); only the commit thread writes it.
  Coordinator(const Clock& clock, JobStore& store, CoordinatorOptions options);
  ~Coordinator();

  // Loads the state from the store and starts the commit thread and the ticker. Call once.
  Status Start() EXCLUDES(mu_);
  // Closes every stream, stops the ticker, commits what is queued and stops the commit
  // thread. Idempotent; the destructor calls it.
  void Stop() EXCLUDES(mu_);

  // What the metrics exporter gets: copied under the state lock in O(active jobs + workers),
  // used after it is released.
  struct ExportSnapshot {
    JobManager::Stats stats;
    std::vector<v1::Job> active;          // summaries of the unfinished jobs
    std::vector<v1::Job> finished;        // ... of those that finished since the last export
    std::vector<v1::WorkerInfo> workers;  // every known worker
    std::vector<JobManager::Duration> durations;  // phases that ended since the last export
  };
  // Called every export_interval_ms on the ticker thread, with no lock held. Set before Start.
  using ExportFn = std::function<void(const ExportSnapshot&)>;
  void set_on_export(ExportFn fn) { on_export_ = std::move(fn); }
  // The commit pipeline: its on_commit (called on the commit thread, no lock held, after each
  // group commit reached the durable store: how long the write took, how many changes it
  // held) is set before Start; AcceptsWrites says whether the store refuses writes now (while
  // it does, clients' changes are refused, below).
  CommitPipeline& pipeline() { return pipeline_; }

  // ---- Clients. Replies (`done`) run on the commit thread once the decision is durable.
  // While the store refuses writes (the pipeline retrying: etcd without a quorum, a full disk),
  // a client's change (Submit, Cancel, Delete, SetDrained, ForgetWorker) is refused at
  // once, UNAVAILABLE saying why, instead of waiting behind the failing commit; it changes
  // nothing, so the client may retry (a submit with its request id).
  // `role`: the submitter's token role ("user", "admin"; empty with --insecure);
  // `request_id`: SubmitJobRequest.request_id (JobManager::Submit).
  void Submit(const v1::JobSpec& spec, const std::string& owner, const std::string& role,
              const std::string& request_id, std::function<void(StatusOr<std::string>)> done)
      EXCLUDES(mu_);
  // `cascade`: JobManager::Cancel's (cancel --cascade).
  void Cancel(const std::string& id, const std::string& reason, const std::string& by,
              std::function<void(StatusOr<v1::Job>)> done, bool cascade = false) EXCLUDES(mu_);
  // JobManager::Delete: `done` gets the workers told to remove the job's files, once the
  // deletion is durable.
  void Delete(const std::string& id, const std::string& by,
              std::function<void(StatusOr<std::vector<std::string>>)> done) EXCLUDES(mu_);
  // The job as the state shows it now, durable or not (tests; checks before an action that
  // itself waits for its commit).
  StatusOr<v1::Job> Get(const std::string& id) EXCLUDES(mu_);
  // The job, once every change this read can see is durable: `done` runs at once (no lock
  // held) when nothing waits for the commit thread, else on it after what is queued. So a
  // `kill -9` never rolls back what a client was shown.
  void GetCommitted(const std::string& id, std::function<void(StatusOr<v1::Job>)> done)
      EXCLUDES(mu_);
  // The job's metric history (JobManager::GetMetrics); NOT_FOUND for an unknown id.
  StatusOr<v1::JobMetrics> GetMetrics(const std::string& id) EXCLUDES(mu_);
  // One page of jobs (JobManager::ListPage), answered as GetCommitted is.
  void ListPageCommitted(const JobQuery& query, std::function<void(JobManager::JobPage)> done)
      EXCLUDES(mu_);
  std::vector<v1::WorkerInfo> ListWorkers() EXCLUDES(mu_);
  // JobManager::ReferencedCode.
  std::set<std::string> ReferencedCode() EXCLUDES(mu_);
  JobManager::WorkerPage ListWorkersPage(const WorkerQuery& query) EXCLUDES(mu_);
  // JobManager::SetDrained; `done` runs once the change is durable.
  void SetDrained(const std::string& worker, bool drained, const std::string& by, bool now,
                  std::function<void(StatusOr<v1::WorkerInfo>)> done) EXCLUDES(mu_);
  // JobManager::SetCordoned; `done` runs once the change is durable.
  void SetCordoned(const std::string& worker, bool cordoned, const std::string& reason,
                   const std::string& by, std::function<void(StatusOr<v1::WorkerInfo>)> done)
      EXCLUDES(mu_);
  // JobManager::ForgetWorker (refused while the worker's stream is open); `done` runs once
  // the removal is durable.
  void ForgetWorker(const std::string& worker, const std::string& by,
                    std::function<void(StatusOr<JobManager::ForgottenWorker>)> done) EXCLUDES(mu_);

  // Watches a job: `fn` gets the snapshot, then every event, metric and snapshot, and
  // finally done = true; it runs on the commit thread, in order, and must not block.
  // Returns the watch id for Unwatch, or NOT_FOUND.
  StatusOr<uint64_t> Watch(const std::string& id, JobManager::WatchFn fn) EXCLUDES(mu_);
  void Unwatch(uint64_t watch_id) EXCLUDES(mu_);

  // Asks the worker that ran `rank` for its log (JobManager::RequestLogs). `fn` runs on the
  // commit thread with the answer or an error. Returns the attempt asked for and whether the
  // job had finished when asked.
  struct LogRequest {
    int attempt = -1;
    bool job_finished = false;
  };
  StatusOr<LogRequest> RequestLogs(const std::string& id, int rank, int attempt, int64_t offset,
                                   int max_bytes, int wait_ms, JobManager::LogFn fn) EXCLUDES(mu_);

  // ---- Worker streams (the name comes from the stream's first message, Register).
  // Makes `stream` the worker's stream (closing an older one), reconciles what it reports,
  // and queues RegisterAck as the first message on it.
  void OnRegister(const v1::Register& reg, std::shared_ptr<WorkerStream> stream) EXCLUDES(mu_);
  void OnWorkerMessage(const std::string& worker, const v1::WorkerMessage& msg) EXCLUDES(mu_);
  // The stream ended. Ignored unless `stream` is still the worker's current one.
  void OnStreamClosed(const std::string& worker, const WorkerStream* stream) EXCLUDES(mu_);
  // The open streams: whether a worker is connected, how many are (any thread, no state
  // lock).
  const WorkerStreamTable& streams() const { return streams_; }

  // Advances timeouts once (the ticker does this every tick_ms).
  void Tick() EXCLUDES(mu_);
  // How many ticks the ticker thread has completed (each took the state lock): the
  // systemd watchdog's proof of life. Any thread.
  uint64_t ticks() const { return ticker_ ? ticker_->ticks() : 0; }
  // Returns once everything decided before the call is committed and dispatched (tests).
  void Flush() EXCLUDES(mu_);

 private:
  // Runs `f` with mu_ held, then hands what it decided to the commit pipeline (what `f` puts
  // in effects_.after runs on the commit thread once the section's writes are durable).
  // Clang's analysis does not follow the lock into a lambda: each `f` starts with
  // mu_.AssertHeld().
  template <typename F>
  auto Locked(F&& f) EXCLUDES(mu_);
  // `read`'s result (taken under the lock) to `done` once every change it can see is durable:
  // at once, without the lock, when nothing waits for the commit thread; else on it, after
  // what is queued (GetCommitted, ListPageCommitted).
  template <typename T>
  void AnswerCommitted(const std::function<T()>& read, std::function<void(T)> done) EXCLUDES(mu_);

  const Clock& clock_;
  const CoordinatorOptions options_;
  ExportFn on_export_;

  Mutex mu_;
  Effects effects_ GUARDED_BY(mu_);
  WorkerStreamTable streams_;  // changed only with mu_ held; read from any thread
  WriteBehindStore write_behind_;
  StreamChannel channel_;
  WorkerRegistry registry_ GUARDED_BY(mu_);
  JobManager jobs_ GUARDED_BY(mu_);
  CommitPipeline pipeline_;
  std::unique_ptr<Ticker> ticker_;  // made by Start when run_ticker

  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace convoy

// The coordinator's core: it owns the state lock, the JobManager and the WorkerRegistry, the
// open worker streams, the commit thread and the ticker. CoordinatorServer (the daemon's
// composition root, used by main.cc and the in-process test cluster) constructs it; the gRPC
// services (coordinator/rpc/grpc_service.h) translate messages and call it. No gRPC types here.
//
// Threading: decisions under the lock, I/O after it.
//  - `mu_` (the state lock) guards JobManager, WorkerRegistry, the stream table and the
//    effects of the section in progress. It is held only for in-memory work: JobManager
//    writes into a write-behind JobStore and sends through a WorkerChannel that only record
//    what to do (`Effects`).
//  - When a locked section ends, its effects join the commit queue, still under `mu_`, so the
//    queue is in decision order. The commit thread takes everything queued, writes it to the
//    durable store in ONE transaction (group commit), and only then hands the messages to the
//    worker streams' bounded queues and runs the deferred callbacks (unary replies, watch
//    updates, log data). So a transition is durable before any message acting on it leaves,
//    and a reply is sent only once what it reports is durable.
//  - Callbacks handed to the outside (watch updates, log data, replies) run on the commit
//    thread with no lock held; they must not block (they queue to a stream and return).
//  - Lock order: mu_, then commit_mu_. Stream implementations take their own lock inside
//    Enqueue/Close and never call back into the Coordinator from there.
//  - When the durable store fails, the commit thread logs it and retries every second; the
//    messages and replies of the batch wait (nothing is acted on before it is persisted).
//    A store that keeps failing for `store_give_up_ms` stops the coordinator (crash-only:
//    `on_store_lost`, by default a critical log line and exit 1, for systemd to restart it
//    from what was persisted) instead of retrying forever while the queue grows.
//  - Reads for clients (GetCommitted, ListPageCommitted) answer only with committed state:
//    when the commit thread still has changes to persist, the answer waits behind them.
//
// Size: about 35 methods, over the guide's 25, on purpose: the public ones are the one API
// the gRPC services call, each a locked section that routes to the JobManager (itself a
// router over the controllers, coordinator/control/job_manager.h) or the WorkerRegistry; the
// private ones are the commit thread and the ticker that every section shares.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "convoy/v1/job.pb.h"
#include "convoy/v1/worker.pb.h"
#include "coordinator/control/job_manager.h"
#include "coordinator/state/worker_registry.h"
#include "coordinator/store/job_store.h"

namespace convoy {

// One worker's open stream, as the Coordinator sees it (the gRPC reactor implements it;
// tests may fake it).
class WorkerStream {
 public:
  virtual ~WorkerStream() = default;
  // Queues `msg` for the worker; false when the stream is closed, or over its bound (then
  // the stream is dropped with a log line). Never blocks. Called on the commit thread.
  virtual bool Enqueue(const v1::CoordinatorMessage& msg) = 0;
  // Ends the stream (replaced by a newer one of the same worker, or shutdown). Idempotent;
  // never blocks. Called on the commit thread or at shutdown, never with the state lock.
  virtual void Close(const std::string& why) = 0;
};

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

class Coordinator {
 public:
  // `store` is the durable store (SQLite in production); only the commit thread writes it.
  Coordinator(const Clock& clock, JobStore& store, CoordinatorOptions options);
  ~Coordinator();

  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

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
  // Called on the commit thread, no lock held, after each group commit reached the durable
  // store: how long the successful write took and how many changes it held. Set before Start.
  using CommitFn = std::function<void(double seconds, size_t writes)>;
  void set_on_commit(CommitFn fn) { on_commit_ = std::move(fn); }

  // ---- Clients. Replies (`done`) run on the commit thread once the decision is durable.
  // While the store refuses writes (Persist retrying: etcd without a quorum, a full disk),
  // a client's change (Submit, Cancel, Delete, SetDrained, ForgetWorker) is refused at
  // once, UNAVAILABLE saying why, instead of waiting behind the failing commit; it changes
  // nothing, so the client may retry (a submit with its request id).
  // `role`: the submitter's token role ("user", "admin"; empty with --insecure);
  // `request_id`: SubmitJobRequest.request_id (JobManager::Submit).
  void Submit(const v1::JobSpec& spec, const std::string& owner, const std::string& role,
              const std::string& request_id, std::function<void(StatusOr<std::string>)> done)
      EXCLUDES(mu_);
  void Cancel(const std::string& id, const std::string& reason, const std::string& by,
              std::function<void(StatusOr<v1::Job>)> done) EXCLUDES(mu_);
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
  std::vector<v1::Job> List(bool full) EXCLUDES(mu_);
  // One page of jobs / workers (JobManager::ListPage, ListWorkersPage).
  JobManager::JobPage ListPage(const JobQuery& query) EXCLUDES(mu_);
  // ListPage, answered as GetCommitted is.
  void ListPageCommitted(const JobQuery& query, std::function<void(JobManager::JobPage)> done)
      EXCLUDES(mu_);
  std::vector<v1::WorkerInfo> ListWorkers() EXCLUDES(mu_);
  // JobManager::ReferencedCode.
  std::set<std::string> ReferencedCode() EXCLUDES(mu_);
  JobManager::WorkerPage ListWorkersPage(const WorkerQuery& query) EXCLUDES(mu_);
  // JobManager::SetDrained; `done` runs once the change is durable.
  void SetDrained(const std::string& worker, bool drained, const std::string& by, bool now,
                  std::function<void(StatusOr<v1::WorkerInfo>)> done) EXCLUDES(mu_);
  // JobManager::ForgetWorker (refused while the worker's stream is open); `done` runs once
  // the removal is durable.
  void ForgetWorker(const std::string& worker, const std::string& by,
                    std::function<void(StatusOr<JobManager::ForgottenWorker>)> done) EXCLUDES(mu_);
  JobManager::Stats GetStats() EXCLUDES(mu_);

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
  // Open streams (for logs and tests).
  size_t ConnectedWorkers() EXCLUDES(mu_);
  // Whether a worker of this name has its stream open now.
  bool WorkerConnected(const std::string& name) EXCLUDES(mu_);

  // Whether the store refuses writes now (see above), and why.
  Status StoreAcceptsWrites() EXCLUDES(commit_mu_);
  // A client's change while the store refuses writes: answers `done` with the refusal and
  // returns true; false (`done` untouched) while it accepts them.
  template <typename T>
  bool RefusedWhileTheStoreFails(const std::function<void(StatusOr<T>)>& done)
      EXCLUDES(commit_mu_) {
    Status refused = StoreAcceptsWrites();
    if (refused.ok()) return false;
    done(refused);
    return true;
  }

  // Advances timeouts once (the ticker does this every tick_ms).
  void Tick() EXCLUDES(mu_);
  // How many ticks the ticker thread has completed (each took the state lock): the
  // systemd watchdog's proof of life. Any thread.
  uint64_t ticks() const { return ticks_.load(std::memory_order_relaxed); }
  // Returns once everything decided before the call is committed and dispatched (tests).
  void Flush() EXCLUDES(mu_, commit_mu_);

 private:
  // What a locked section decided: durable writes, then messages, then callbacks.
  struct Effects {
    std::vector<StoreWrite> writes;
    std::vector<std::pair<std::shared_ptr<WorkerStream>, v1::CoordinatorMessage>> sends;
    std::vector<std::function<void()>> after;
    bool empty() const { return writes.empty() && sends.empty() && after.empty(); }
  };

  // The JobStore JobManager writes to: it records the writes in the section's effects.
  class WriteBehindStore : public JobStore {
   public:
    explicit WriteBehindStore(Coordinator& c) : c_(c) {}
    Status SaveJob(const v1::Job& job, const v1::JobEvent* event) override;
    StatusOr<std::vector<v1::Job>> LoadJobs() override;
    Status SaveWorker(const v1::WorkerInfo& worker) override;
    StatusOr<std::vector<v1::WorkerInfo>> LoadWorkers() override;
    Status DeleteWorker(const std::string& name) override;
    Status SaveJobMetrics(const v1::JobMetrics& job_metrics) override;
    StatusOr<std::vector<v1::JobMetrics>> LoadJobMetrics() override;
    Status DeleteJob(const std::string& id) override;
    Status SaveFileDeletion(const FileDeletion& deletion, bool pending) override;
    StatusOr<std::vector<FileDeletion>> LoadFileDeletions() override;

   private:
    Coordinator& c_;
  };
  // The WorkerChannel JobManager sends through: binds each message to the worker's current
  // stream and records it in the section's effects.
  class StreamChannel : public WorkerChannel {
   public:
    explicit StreamChannel(Coordinator& c) : c_(c) {}
    bool Send(const std::string& name, const v1::CoordinatorMessage& msg) override;

   private:
    Coordinator& c_;
  };

  // Runs `f` with mu_ held, then queues what it decided for the commit thread. Clang's
  // analysis does not follow the lock into a lambda: each `f` starts with mu_.AssertHeld().
  template <typename F>
  auto Locked(F&& f) EXCLUDES(mu_);
  // Moves the section's effects onto the commit queue.
  void Seal() REQUIRES(mu_) EXCLUDES(commit_mu_);
  // Runs `fn` on the commit thread after this section's writes are durable.
  void Defer(std::function<void()> fn) REQUIRES(mu_) { effects_.after.push_back(std::move(fn)); }
  // `read`'s result (taken under the lock) to `done` once every change it can see is durable:
  // at once, without the lock, when nothing waits for the commit thread; else on it, after
  // what is queued (GetCommitted, ListPageCommitted).
  template <typename T>
  void AnswerCommitted(const std::function<T()>& read, std::function<void(T)> done) EXCLUDES(mu_);
  // Whether everything decided so far is durable and dispatched (nothing queued or pending).
  bool Settled() REQUIRES(mu_) EXCLUDES(commit_mu_);
  // Writes `writes`, retrying every second; false once the store has failed for
  // store_give_up_ms (on_store_lost has run) or the coordinator stops.
  bool Persist(std::vector<StoreWrite>& writes) EXCLUDES(mu_, commit_mu_);

  void CommitLoop() EXCLUDES(mu_, commit_mu_);
  void TickerLoop() EXCLUDES(mu_);

  const Clock& clock_;
  JobStore& durable_;
  const CoordinatorOptions options_;
  WriteBehindStore write_behind_{*this};
  StreamChannel channel_{*this};
  ExportFn on_export_;
  CommitFn on_commit_;

  Mutex mu_;
  WorkerRegistry registry_ GUARDED_BY(mu_);
  JobManager jobs_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<WorkerStream>> streams_ GUARDED_BY(mu_);
  Effects effects_ GUARDED_BY(mu_);

  Mutex commit_mu_ ACQUIRED_AFTER(mu_);
  CondVar commit_cv_;   // work queued, or stopping
  CondVar flushed_cv_;  // a batch finished
  std::deque<Effects> queue_ GUARDED_BY(commit_mu_);
  uint64_t sealed_ GUARDED_BY(commit_mu_) = 0;  // batches queued so far
  uint64_t done_ GUARDED_BY(commit_mu_) = 0;    // batches committed and dispatched so far
  bool stopping_ GUARDED_BY(commit_mu_) = false;
  bool store_lost_ GUARDED_BY(commit_mu_) = false;  // the commit thread gave up
  // Set while Persist retries a failed write: the store's last error; empty once it wrote.
  std::string store_refusing_ GUARDED_BY(commit_mu_);

  Mutex ticker_mu_;
  CondVar ticker_cv_;
  bool ticker_stop_ GUARDED_BY(ticker_mu_) = false;

  bool started_ = false;
  bool stopped_ = false;
  std::thread commit_thread_;
  std::thread ticker_thread_;
  std::atomic<uint64_t> ticks_{0};
};

}  // namespace convoy

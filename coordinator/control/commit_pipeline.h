// The group-commit pipeline: what the Coordinator's locked sections decided (Effects,
// section_effects.h) goes in, in decision order; one thread takes everything queued, writes
// it to the durable store in ONE transaction (group commit), and only then hands the
// messages to the worker streams' bounded queues and runs the deferred callbacks (unary
// replies, watch updates, log data). So a transition is durable before any message acting
// on it leaves, and a reply is sent only once what it reports is durable.
//
// When the durable store fails, the commit thread logs it and retries every second; the
// messages and replies of the batch wait (nothing is acted on before it is persisted), and
// AcceptsWrites says why, so that the Coordinator refuses clients' changes at once instead
// of queueing them behind the failing write. A store that keeps failing for
// `store_give_up_ms` stops the coordinator (crash-only: `on_store_lost`, by default a
// critical log line and exit 1, for systemd to restart it from what was persisted) instead
// of retrying forever while the queue grows.
//
// Threading: Queue is called with the Coordinator's state lock held (which is what makes the
// queue's order the decisions' order); the pipeline's own mutex is taken after it. The
// callbacks and Enqueue/Close of streams run on the commit thread with no lock held; they
// must not block. Every other method may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "coordinator/control/section_effects.h"
#include "coordinator/store/job_store.h"

namespace convoy {

class CommitPipeline {
 public:
  struct Options {
    // How long the durable store may keep failing before the pipeline gives up (real time
    // from the first failure of a batch); then `on_store_lost` runs with what to log, on the
    // commit thread, which then stops. Empty: log it as critical and exit 1.
    int64_t store_give_up_ms = 60000;
    std::function<void(const std::string& why)> on_store_lost;
  };
  // Called on the commit thread, no lock held, after each group commit reached the durable
  // store: how long the successful write took and how many changes it held.
  using CommitFn = std::function<void(double seconds, size_t writes)>;

  // `durable`: only the commit thread writes it. Nothing runs before Start.
  CommitPipeline(JobStore& durable, Options options);
  // Stop.
  ~CommitPipeline();
  CommitPipeline(const CommitPipeline&) = delete;
  CommitPipeline& operator=(const CommitPipeline&) = delete;

  // Before Start.
  void set_on_commit(CommitFn fn) { on_commit_ = std::move(fn); }
  // Starts the commit thread. Call once.
  void Start() EXCLUDES(mu_);
  // Commits what is queued (while the store takes it) and stops the commit thread.
  // Idempotent.
  void Stop() EXCLUDES(mu_);

  // Queues one section's effects (nothing when they are empty). With the state lock held.
  void Queue(Effects effects) EXCLUDES(mu_);
  // Whether every batch queued so far is committed and dispatched.
  bool Idle() EXCLUDES(mu_);
  // Returns once every batch queued before the call is committed and dispatched, or the
  // pipeline stops or gives up on the store.
  void Flush() EXCLUDES(mu_);
  // OK, or UNAVAILABLE with the store's last error while a write is being retried.
  Status AcceptsWrites() EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);
  // Writes `writes`, retrying every second; false once the store has failed for
  // store_give_up_ms (on_store_lost has run) or the pipeline stops.
  bool Persist(std::vector<StoreWrite>& writes) EXCLUDES(mu_);

  JobStore& durable_;
  const Options options_;
  CommitFn on_commit_;

  Mutex mu_;
  CondVar work_cv_;     // work queued, or stopping
  CondVar flushed_cv_;  // a batch finished
  std::deque<Effects> queue_ GUARDED_BY(mu_);
  uint64_t queued_ GUARDED_BY(mu_) = 0;  // batches queued so far
  uint64_t done_ GUARDED_BY(mu_) = 0;    // batches committed and dispatched so far
  bool stopping_ GUARDED_BY(mu_) = false;
  bool store_lost_ GUARDED_BY(mu_) = false;  // the commit thread gave up
  // Set while Persist retries a failed write: the store's last error; empty once it wrote.
  std::string store_refusing_ GUARDED_BY(mu_);
  std::thread thread_;
};

// A client's change while the store refuses writes (`pipeline`'s AcceptsWrites): answers
// `done` with the refusal (UNAVAILABLE, saying why; nothing was changed, so the client may
// retry) and returns true; false, `done` untouched, while it accepts them.
template <typename T>
bool RefusedWhileTheStoreFails(CommitPipeline& pipeline,
                               const std::function<void(StatusOr<T>)>& done) {
  Status refused = pipeline.AcceptsWrites();
  if (refused.ok()) return false;
  done(refused);
  return true;
}

}  // namespace convoy

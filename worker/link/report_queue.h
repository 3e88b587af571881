// The worker's reports on their way to the coordinator. The supervisor sends into an Outbox;
// the one the daemon gives it is a ReportQueue, which the coordinator connection drains into
// the current stream (worker/link/coordinator_connection.h): a report is accepted only while a
// stream is registered, and what was queued for a stream that ended is dropped (the next
// Register carries the state instead).
//
// Threading: every method may be called from any thread and never blocks, except Next, which
// the stream's writer thread calls. `mu_` is taken with no other lock held inside it.
#pragma once

#include <cstddef>
#include <deque>

#include "common/mutex.h"
#include "convoy/v1/worker.pb.h"

namespace convoy {

// Where the supervisor's reports go.
class Outbox {
 public:
  virtual ~Outbox() = default;
  // Sends now; false when not connected (the message is then dropped).
  virtual bool Send(const v1::WorkerMessage& msg) = 0;
};

class ReportQueue : public Outbox {
 public:
  // Far more than a worker sends in the seconds a healthy stream can stall.
  static constexpr size_t kMaxQueued = 100000;

  // Queues `msg` for the registered stream; false when there is none or the queue is full.
  bool Send(const v1::WorkerMessage& msg) override EXCLUDES(mu_);

  // A stream registered: the queue is emptied and accepts reports until Close.
  void Open() EXCLUDES(mu_);
  // The stream ended: what is queued is dropped, Send refuses and Next returns false.
  void Close() EXCLUDES(mu_);
  // Whether a stream is registered now (Open without Close since): the worker's /readyz.
  bool open() EXCLUDES(mu_);
  // Waits for the next report of the open stream; false once it is closed.
  bool Next(v1::WorkerMessage* msg) EXCLUDES(mu_);

 private:
  Mutex mu_;
  CondVar cv_;  // a report was queued, or the queue closed
  bool open_ GUARDED_BY(mu_) = false;
  std::deque<v1::WorkerMessage> queue_ GUARDED_BY(mu_);
};

}  // namespace convoy

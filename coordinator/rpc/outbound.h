// What every gRPC service of the coordinator shares (coordinator/rpc/grpc_service.h): the
// conversion of a convoy::Status, the bounds of the per-stream queues, the outgoing side of a
// streaming call (`Outbound`: a bounded queue with at most one write in flight) and the
// reactors of calls refused before they started.
//
// Threading: see Outbound. No reactor operation (StartWrite, Finish) is ever started with a
// lock held.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <deque>
#include <utility>

#include "common/mutex.h"
#include "common/status.h"

namespace convoy {

// grpc::Status for a convoy::Status.
grpc::Status ToGrpc(const Status& status);

// Bounds of the per-stream queues.
struct StreamLimits {
  // Messages queued for one worker before it counts as stuck and its stream is dropped
  // (it reconnects and reconciles). A 10,000-rank attempt's launch is one message per worker.
  size_t worker_queue = 4096;
  // Updates queued for one `convoy watch` before the watcher counts as too slow.
  size_t watch_queue = 1024;
};

// The outgoing side of one streaming call: a bounded queue with at most one write in
// flight, and the call's end. Every method may be called from any thread. Decisions are
// made under mu_; the reactor operation they lead to (StartWrite, Finish, TryCancel) is
// started after mu_ is released, "pinned" so that OnDone (Detach) waits for it: the
// reactor and its context are never touched after OnDone.
template <typename Msg, typename Reactor>
class Outbound {
 public:
  enum class Push { kQueued, kClosed, kOverflow };

  Outbound(Reactor* reactor, grpc::CallbackServerContext* context, size_t limit)
      : reactor_(reactor), context_(context), limit_(limit) {}

  // Queues `msg`. kOverflow: the queue was full, so the call is ended with
  // RESOURCE_EXHAUSTED and cancelled (a write the client never reads would never finish).
  Push Enqueue(Msg msg) EXCLUDES(mu_) {
    Action a;
    Push result = Push::kQueued;
    {
      MutexLock lock(mu_);
      if (closing_) return Push::kClosed;
      if (queue_.size() >= limit_) {
        closing_ = true;
        queue_.clear();
        status_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                               "the client did not read fast enough");
        a.cancel = true;
        result = Push::kOverflow;
      } else {
        queue_.push_back(std::move(msg));
      }
      Next(a);
    }
    Run(a);
    return result;
  }

  // The reactor's OnWriteDone.
  void WriteDone(bool ok) EXCLUDES(mu_) {
    Action a;
    {
      MutexLock lock(mu_);
      writing_ = false;
      if (!ok) {
        closing_ = true;
        queue_.clear();
      }
      Next(a);
    }
    Run(a);
  }

  // Ends the call with `status` once everything queued is written.
  void Finish(grpc::Status status) EXCLUDES(mu_) {
    Action a;
    {
      MutexLock lock(mu_);
      if (closing_) return;
      closing_ = true;
      status_ = std::move(status);
      Next(a);
    }
    Run(a);
  }

  // Ends the call now with `status`, dropping what is queued and cancelling a write in
  // flight.
  void Abort(grpc::Status status) EXCLUDES(mu_) {
    Action a;
    {
      MutexLock lock(mu_);
      if (finished_) return;
      if (!closing_) status_ = std::move(status);
      closing_ = true;
      queue_.clear();
      a.cancel = true;
      Next(a);
    }
    Run(a);
  }

  bool closing() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return closing_;
  }

  // The reactor's OnDone: waits for operations in progress; nothing touches the reactor after.
  void Detach() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    alive_ = false;
    while (pins_ > 0) unpinned_.Wait(mu_);
  }

 private:
  struct Action {
    bool cancel = false;
    bool write = false;
    bool finish = false;
    bool pinned = false;
  };

  // Chooses what to start next; pins the reactor when something is to be started.
  void Next(Action& a) REQUIRES(mu_) {
    if (!alive_) {
      a = Action();
      return;
    }
    if (!finished_ && !writing_) {
      if (!queue_.empty()) {
        writing_ = true;
        inflight_ = std::move(queue_.front());
        queue_.pop_front();
        a.write = true;
      } else if (closing_) {
        finished_ = true;
        a.finish = true;
      }
    }
    if (a.cancel || a.write || a.finish) {
      a.pinned = true;
      ++pins_;
    }
  }

  void Run(const Action& a) EXCLUDES(mu_) {
    if (!a.pinned) return;
    if (a.cancel) context_->TryCancel();
    if (a.write) reactor_->StartWrite(&inflight_);
    if (a.finish) reactor_->Finish(status_);
    MutexLock lock(mu_);
    if (--pins_ == 0) unpinned_.SignalAll();
  }

  Reactor* const reactor_;
  grpc::CallbackServerContext* const context_;
  const size_t limit_;
  Mutex mu_;
  CondVar unpinned_;
  std::deque<Msg> queue_ GUARDED_BY(mu_);
  Msg inflight_;  // written by the thread that set writing_, read by gRPC during the write
  bool writing_ GUARDED_BY(mu_) = false;
  bool closing_ GUARDED_BY(mu_) = false;   // no more messages accepted
  bool finished_ GUARDED_BY(mu_) = false;  // Finish started
  bool alive_ GUARDED_BY(mu_) = true;      // OnDone not yet called
  int pins_ GUARDED_BY(mu_) = 0;
  grpc::Status status_;  // set before finished_, read once by the finishing thread
};

// Calls refused before they started (credentials, rights, limits).
template <typename Req, typename Resp>
class RefusedBidi final : public grpc::ServerBidiReactor<Req, Resp> {
 public:
  explicit RefusedBidi(const Status& why) { this->Finish(ToGrpc(why)); }
  void OnDone() override { delete this; }
};

template <typename Resp>
class RefusedWrite final : public grpc::ServerWriteReactor<Resp> {
 public:
  explicit RefusedWrite(const Status& why) { this->Finish(ToGrpc(why)); }
  void OnDone() override { delete this; }
};

inline grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                           const Status& why) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(why));
  return reactor;
}

}  // namespace convoy

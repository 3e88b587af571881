// A thread of its own for slow work that must not run where it was decided: a store write
// decided on the coordinator's commit thread, a 100 MB hash asked for on a gRPC callback
// thread. Posted functions run one at a time, in order; each reports back by itself (a
// callback it was given). Header-only.
//
// Threading: Post from any thread (never blocks); the functions run on the thread, with no
// lock of this class held. The destructor runs what was posted, then joins.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <utility>

#include "common/mutex.h"

namespace convoy {

class WorkThread {
 public:
  WorkThread() : thread_([this] { Loop(); }) {}
  ~WorkThread() {
    {
      MutexLock lock(mu_);
      stopping_ = true;
      cv_.SignalAll();
    }
    thread_.join();
  }
  WorkThread(const WorkThread&) = delete;
  WorkThread& operator=(const WorkThread&) = delete;

  void Post(std::function<void()> fn) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    queue_.push_back(std::move(fn));
    cv_.Signal();
  }

  // Whether the calling thread is this one (tests; checks that work left its caller).
  bool OnThisThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void Loop() EXCLUDES(mu_) {
    for (;;) {
      std::function<void()> fn;
      {
        MutexLock lock(mu_);
        while (queue_.empty() && !stopping_) cv_.Wait(mu_);
        if (queue_.empty()) return;  // stopping, and everything posted has run
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace convoy

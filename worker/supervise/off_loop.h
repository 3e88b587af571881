// A thread of the supervisor's for work that must not hold up its loop, the thread that sends
// heartbeats, reaps ranks and answers the coordinator (issue 44): checkpoint copies, tree
// removals, cgroup kills. Tasks run one at a time, in the order given; a task that has
// something to say posts it to the loop as a command (Supervisor::ToLoop), where the loop's
// state is changed. The code unpacker (worker/files/code_unpacker.h) and the data cache
// (worker/files/data_cache.h) work the same way with threads of their own.
//
// Threading: Run, Stop and WaitIdle from any thread; tasks run on the thread, without this
// class's lock held.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "common/mutex.h"

namespace convoy {

class OffLoop {
 public:
  // `what` names the thread in the log ("files", "cgroups").
  explicit OffLoop(std::string what);
  // Stops (as Stop(true)).
  ~OffLoop();
  OffLoop(const OffLoop&) = delete;
  OffLoop& operator=(const OffLoop&) = delete;

  // Starts the thread. Call once.
  void Start();
  // Queues `task`. After Stop it is dropped.
  void Run(std::function<void()> task) EXCLUDES(mu_);
  // Ends the thread once the task in hand is done: with `finish_queued`, after every queued
  // task has run too (a cgroup that must be gone before the worker's own goes); else what is
  // still queued is dropped (a copy for a launch that will never start). Idempotent.
  void Stop(bool finish_queued) EXCLUDES(mu_);
  // Waits until nothing is queued or running (tests).
  void WaitIdle() EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);

  const std::string what_;
  Mutex mu_;
  CondVar cv_;  // a task was queued or finished, or Stop was called
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  bool finish_queued_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace convoy

// Stopping on SIGTERM (issue 16). The handler only sets a flag; the training thread reads it
// at each step boundary, where the ranks agree (a tiny all-reduce) whether any of them was
// asked to stop, finish the step, write a checkpoint and a snapshot, and exit: 0 when the
// worker's CONVOY_PREEMPT_FILE exists (a preemption, an elastic resize, drain --now: "save and
// stop"), 143 otherwise (a cancel, or a teardown because another rank failed: never a
// successful end of training).
//
// StopWatchdog takes the signal (see InstallStopHandler) and covers what the step boundary
// cannot: SIGTERM before training started (nothing
// to save yet: exit at once, as the default action would), and a rank blocked in a collective
// whose peer hangs (a host that vanished without closing its connections): after
// `stuck_after` it writes the last will under the state lock and exits 143.
//
// No LibTorch here.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace convoy::trainer {

// Installs the SIGTERM handler (SA_RESTART; it sets a flag and nothing else) and blocks
// SIGTERM in the calling thread, so in every thread it starts afterwards: a StopWatchdog then
// takes the signal (sigtimedwait) and sets the same flag, and no other thread's system call
// is interrupted. Call in the rank process, on its main thread before it starts threads;
// never in the warm trainer before it forks. Idempotent.
void InstallStopHandler();
// True once SIGTERM arrived.
bool StopRequested();

// Whether `path` exists (a preemption), and its content, trimmed, at most 200 bytes, in
// `reason` ("preempted" when empty).
bool ReadPreemptReason(const std::string& path, std::string* reason);

// Exit codes.
constexpr int kExitStoppedBySigterm = 143;  // 128 + SIGTERM, as the default action reports
constexpr int kExitSampleCheckFailed = 3;
// Bad steps went on after a rewind, or nothing good to rewind to (trainer/bad_steps.h).
constexpr int kExitBadSteps = 4;

class StopWatchdog {
 public:
  enum class Phase { kStartup, kTraining, kCollective };
  // `on_startup_stop` and `on_stuck` run on the watchdog's thread and must not return (they
  // exit the process). `on_stuck` runs with state_mutex() held.
  StopWatchdog(std::function<void()> on_startup_stop, std::function<void()> on_stuck,
               std::chrono::milliseconds stuck_after);
  ~StopWatchdog();
  // The training thread says where it is. kCollective: waiting for the other ranks (the
  // gradient all-reduce, the stop agreement, evaluation's sums).
  void SetPhase(Phase phase);
  // Held by the training thread while it changes the state a last will saves (optimizer.step
  // and the position that goes with it).
  std::mutex& state_mutex() { return state_mu_; }

 private:
  void Loop();

  const std::function<void()> on_startup_stop_;
  const std::function<void()> on_stuck_;
  const std::chrono::milliseconds stuck_after_;
  std::mutex state_mu_;
  std::mutex mu_;
  Phase phase_ = Phase::kStartup;                // guarded by mu_
  std::chrono::steady_clock::time_point since_;  // guarded by mu_: when phase_ was entered
  bool quit_ = false;                            // guarded by mu_
  std::thread thread_;
};

}  // namespace convoy::trainer

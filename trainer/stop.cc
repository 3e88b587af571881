#include "trainer/stop.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <iterator>

namespace convoy::trainer {
namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the handler needs a lock-free flag");

void OnSigterm(int) { g_stop.store(true, std::memory_order_relaxed); }

}  // namespace

void InstallStopHandler() {
  struct sigaction sa {};
  sa.sa_handler = OnSigterm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  // Blocked in this thread and so in every thread it creates (Gloo's, OpenMP's, the
  // prefetcher's): no system call of theirs is interrupted; StopWatchdog takes it with
  // sigtimedwait. The handler is for a thread that existed before.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
}

bool StopRequested() { return g_stop.load(std::memory_order_relaxed); }

bool ReadPreemptReason(const std::string& path, std::string* reason) {
  if (path.empty()) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text = text.substr(0, 200);
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  const auto first = text.find_first_not_of(' ');
  const auto last = text.find_last_not_of(' ');
  *reason = first == std::string::npos ? "preempted" : text.substr(first, last - first + 1);
  return true;
}

StopWatchdog::StopWatchdog(std::function<void()> on_startup_stop, std::function<void()> on_stuck,
                           std::chrono::milliseconds stuck_after)
    : on_startup_stop_(std::move(on_startup_stop)),
      on_stuck_(std::move(on_stuck)),
      stuck_after_(stuck_after),
      since_(std::chrono::steady_clock::now()) {
  thread_ = std::thread([this] { Loop(); });
}

StopWatchdog::~StopWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  thread_.join();  // within a tick
}

void StopWatchdog::SetPhase(Phase phase) {
  std::lock_guard<std::mutex> lock(mu_);
  if (phase != phase_) since_ = std::chrono::steady_clock::now();
  phase_ = phase;
}

void StopWatchdog::Loop() {
  std::chrono::steady_clock::time_point stop_seen{};
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  const timespec tick{0, 20 * 1000 * 1000};
  std::unique_lock<std::mutex> lock(mu_);
  while (!quit_) {
    lock.unlock();
    if (sigtimedwait(&term, nullptr, &tick) == SIGTERM) g_stop.store(true);
    lock.lock();
    if (quit_ || !StopRequested()) continue;
    const auto now = std::chrono::steady_clock::now();
    if (stop_seen == std::chrono::steady_clock::time_point{}) stop_seen = now;
    if (phase_ == Phase::kStartup) {
      on_startup_stop_();  // does not return
    }
    if (phase_ == Phase::kCollective && now - std::max(stop_seen, since_) >= stuck_after_) {
      // Lock order: state_mu_, then mu_. The training thread holds state_mu_ through
      // optimizer.step and through a graceful stop, so once it is ours the state is a
      // completed step's; whether the trainer is still stuck is checked again under it.
      lock.unlock();
      std::lock_guard<std::mutex> state(state_mu_);
      lock.lock();
      if (phase_ == Phase::kCollective &&
          std::chrono::steady_clock::now() - std::max(stop_seen, since_) >= stuck_after_) {
        lock.unlock();
        on_stuck_();  // does not return
      }
    }
  }
}

}  // namespace convoy::trainer

#include "worker/supervise/off_loop.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace convoy {

OffLoop::OffLoop(std::string what) : what_(std::move(what)) {}

OffLoop::~OffLoop() { Stop(true); }

void OffLoop::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void OffLoop::Run(std::function<void()> task) {
  MutexLock lock(mu_);
  if (stop_) return;
  queue_.push_back(std::move(task));
  cv_.SignalAll();
}

void OffLoop::Stop(bool finish_queued) {
  {
    MutexLock lock(mu_);
    if (!stop_) finish_queued_ = finish_queued;
    stop_ = true;
    if (!finish_queued_ && !queue_.empty()) {
      spdlog::info("stopping: {} queued {} task(s) dropped", queue_.size(), what_);
      queue_.clear();
    }
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void OffLoop::WaitIdle() {
  MutexLock lock(mu_);
  while (busy_ || !queue_.empty()) cv_.Wait(mu_);
}

void OffLoop::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(mu_);
      while (queue_.empty() && !stop_) cv_.Wait(mu_);
      if (queue_.empty() || (stop_ && !finish_queued_)) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    task();
    MutexLock lock(mu_);
    busy_ = false;
    cv_.SignalAll();
  }
}

}  // namespace convoy

#include "worker/link/report_queue.h"

namespace convoy {

bool ReportQueue::Send(const v1::WorkerMessage& msg) {
  MutexLock lock(mu_);
  if (!open_ || queue_.size() >= kMaxQueued) return false;
  queue_.push_back(msg);
  cv_.Signal();
  return true;
}

void ReportQueue::Open() {
  MutexLock lock(mu_);
  open_ = true;
  queue_.clear();
}

void ReportQueue::Close() {
  MutexLock lock(mu_);
  open_ = false;
  queue_.clear();
  cv_.SignalAll();
}

bool ReportQueue::open() {
  MutexLock lock(mu_);
  return open_;
}

bool ReportQueue::Next(v1::WorkerMessage* msg) {
  MutexLock lock(mu_);
  while (open_ && queue_.empty()) cv_.Wait(mu_);
  if (!open_) return false;
  *msg = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

}  // namespace convoy

// A WorkerStream for unit tests: it keeps what is queued on it and why it was closed.
#pragma once

#include <string>
#include <vector>

#include "common/mutex.h"
#include "coordinator/control/worker_streams.h"

namespace convoy {

class FakeStream : public WorkerStream {
 public:
  bool Enqueue(const v1::CoordinatorMessage& msg) override {
    MutexLock lock(mu_);
    if (closed_) return false;
    got_.push_back(msg);
    return true;
  }
  void Close(const std::string& why) override {
    MutexLock lock(mu_);
    closed_ = true;
    close_reason_ = why;
  }
  std::vector<v1::CoordinatorMessage> Messages() {
    MutexLock lock(mu_);
    return got_;
  }
  std::string close_reason() {
    MutexLock lock(mu_);
    return close_reason_;
  }

 private:
  Mutex mu_;
  std::vector<v1::CoordinatorMessage> got_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  std::string close_reason_ GUARDED_BY(mu_);
};

}  // namespace convoy

// Log requests on their way to workers: each gets an id (ReadLogs.request_id), waits for the
// worker's LogData, and fails with UNAVAILABLE when its deadline passes (the wait the request
// asked the worker for, plus the answer timeout). Plain C++ on an injected Clock.
//
// Threading: none of its own; the JobManager calls it with the Coordinator's lock held, and
// the callbacks run there (the Coordinator hands them on to its commit thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "common/clock.h"
#include "common/status.h"
#include "convoy/v1/worker.pb.h"

namespace convoy {

class LogBroker {
 public:
  using LogFn = std::function<void(const StatusOr<v1::LogData>& data)>;

  LogBroker(const Clock& clock, int64_t answer_timeout_ms)
      : clock_(clock), answer_timeout_ms_(answer_timeout_ms) {}

  // Registers a request the worker may hold for `wait_ms`; returns its id. `worker`: the
  // only worker whose answer is taken (empty: any, for tests of the broker alone).
  int64_t Add(LogFn fn, int wait_ms, const std::string& worker = "");
  // Forgets a request that could not be sent (its callback is not called).
  void Cancel(int64_t id);
  // The worker's answer: calls the request's callback once. False for an unknown id (late,
  // cancelled, or never asked), which is ignored.
  // An answer from a worker other than the one asked is ignored too (false).
  bool Answer(const v1::LogData& data, const std::string& from = "");
  // Fails every request past its deadline; returns how many.
  int Expire();
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    LogFn fn;
    int64_t deadline_mono_ms = 0;
    std::string worker;
  };
  const Clock& clock_;
  const int64_t answer_timeout_ms_;
  int64_t next_id_ = 1;
  std::map<int64_t, Pending> pending_;
};

}  // namespace convoy

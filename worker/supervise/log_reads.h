// Log reads (ReadLogs): a rank's log from an offset, or its tail, answered from the file the
// rank writes (worker/files/rank_log.h), or from what is left on disk of an attempt that is not
// in memory any more. A read with wait_ms that has nothing to say yet (a follower, `convoy logs
// -f`, at the end of a running rank's log) is held, a long poll, until bytes come, the rank
// exits or the wait is over; at most kMaxHeld at once, more are answered at once.
//
// Threading: the supervisor thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "convoy/v1/worker.pb.h"
#include "worker/supervise/attempt_table.h"
#include "worker/supervise/reporter.h"
#include "worker/supervise/worker_config.h"

namespace convoy {

class LogReads {
 public:
  static constexpr size_t kMaxHeld = 1024;
  // The most one answer carries.
  static constexpr int64_t kMaxRead = 1 << 20;

  LogReads(const WorkerConfig& config, const AttemptTable& table, Reporter& reporter,
           const Clock& clock);

  // Answers at once, or holds a request with wait_ms that has nothing to say yet.
  void Read(const v1::ReadLogs& req);
  // Answers held requests whose log grew, whose rank exited, or whose wait is over.
  void RetryHeld();
  // When the first held request's wait is over (kNever: none held).
  int64_t NextDeadlineMs() const;
  size_t held() const { return held_.size(); }

 private:
  struct Held {
    v1::ReadLogs req;
    int64_t deadline_ms = 0;
  };
  // True while the rank runs and its log has no bytes at the request's offset.
  bool WouldWait(const v1::ReadLogs& req) const;
  void Answer(const v1::ReadLogs& req);
  // The log file of the request's rank (empty: none) and whether the rank runs.
  std::string PathOf(const v1::ReadLogs& req, bool* running) const;

  const WorkerConfig& config_;
  const AttemptTable& table_;
  Reporter& reporter_;
  const Clock& clock_;
  std::vector<Held> held_;
};

}  // namespace convoy

// The metrics relay: reads the records each attempt's ranks write to its metrics socket
// (worker/exec/metrics_server.h), stamps them with the attempt, and sends them to the
// coordinator in batches (consecutive records of one attempt, at most 500, every 200 ms or
// sooner when a batch is full). While the coordinator is away they wait, at most
// kMaxPending (the oldest are dropped and counted); a batch the link refuses stays queued.
//
// Threading: the supervisor thread, except the totals (any thread, atomics).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "common/clock.h"
#include "convoy/v1/common.pb.h"
#include "worker/host/attempt_key.h"
#include "worker/supervise/attempt_table.h"
#include "worker/supervise/reporter.h"

namespace convoy {

class MetricsRelay {
 public:
  // Metric records kept while the coordinator is away; older ones are dropped.
  static constexpr size_t kMaxPending = 10000;
  static constexpr int kFlushIntervalMs = 200;
  static constexpr size_t kRecordsPerBatch = 500;

  MetricsRelay(Reporter& reporter, const Clock& clock);

  // Also gives every record to `observer` as it is queued (the checkpoint policy's
  // CheckpointReports::OnRecord). Before the first record.
  using Observer = std::function<void(const AttemptKey&, const v1::MetricRecord&)>;
  void Observe(Observer observer) { observer_ = std::move(observer); }

  // Reads what is waiting on `fd`, one of the attempt's metrics socket's descriptors.
  void OnReadable(Attempt& a, int fd);
  // Reads what the attempt's ranks wrote before they went, closes its socket (removing the
  // file) and sends everything queued. Nothing when it has none.
  void Close(Attempt& a);
  // Queues `records` of attempt `key`.
  void Add(const AttemptKey& key, std::vector<v1::MetricRecord>* records);
  // Sends the queued records when a batch is due (or at once with `force`) and the link is up.
  void Flush(bool force);
  // When the next batch is due: kNever when nothing waits or the link is down.
  int64_t NextDueMs() const;

  // Monotonic totals since the worker started. Any thread.
  int64_t received_total() const { return received_total_.load(std::memory_order_relaxed); }
  int64_t dropped_total() const { return dropped_total_.load(std::memory_order_relaxed); }

 private:
  struct Pending {
    AttemptKey key;
    v1::MetricRecord record;
  };

  Reporter& reporter_;
  const Clock& clock_;
  Observer observer_;
  std::deque<Pending> pending_;  // not yet sent, oldest first
  int64_t next_flush_ms_ = 0;
  int64_t dropped_since_sent_ = 0;  // dropped while the coordinator was away, for the log
  std::atomic<int64_t> received_total_{0};
  std::atomic<int64_t> dropped_total_{0};
};

}  // namespace convoy

// Retention (convoy-coordinator --job-retention): which finished jobs are deleted, and when.
// A finished job goes once it ended more than `max_age_ms` ago, and beyond the newest
// `max_count` finished jobs (by when they ended). It looks every kIntervalMs and picks at
// most kBatch jobs a look, so that a coordinator with a long backlog catches up in small
// batches (LookAgainSoon: the next tick). The JobManager deletes what it picks.
//
// Threading: none of its own; called with the Coordinator's lock held.
// Cost: a look is O(jobs log jobs); between looks, O(1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/state/job_table.h"

namespace convoy {

class Retention {
 public:
  static constexpr int64_t kIntervalMs = 10000;
  static constexpr size_t kBatch = 100;

  // 0 for either: no such limit; both 0: nothing is ever deleted.
  Retention(const Clock& clock, int64_t max_age_ms, int64_t max_count)
      : clock_(clock), max_age_ms_(max_age_ms), max_count_(max_count) {}

  // When a look is due: the finished jobs past the retention whose ranks are all stopped,
  // oldest first, at most kBatch. Otherwise nothing.
  std::vector<std::string> Due(const JobTable& table);
  // Every job Due returned was deleted and more may wait: look again at the next call.
  void LookAgainSoon() { next_look_mono_ms_ = clock_.NowMonotonicMs(); }

 private:
  const Clock& clock_;
  const int64_t max_age_ms_;
  const int64_t max_count_;
  int64_t next_look_mono_ms_ = 0;
};

}  // namespace convoy

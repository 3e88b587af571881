#include "coordinator/control/job_stats.h"

#include <algorithm>

namespace convoy {

std::string JobStats::CauseLabel(const v1::RankFailure& failure) {
  switch (failure.cause()) {
    case v1::FAILURE_RANK_EXIT:
      return "rank_exit";
    case v1::FAILURE_SIGNAL:
      return "signal";
    case v1::FAILURE_WORKER_LOST:
      return "worker_lost";
    case v1::FAILURE_HANG:
      return "hang";
    case v1::FAILURE_OTHER:
      return "other";
    default:
      // Recorded before causes were typed: the exit says what it can, never the text.
      if (failure.exit().signal() != 0) return "signal";
      if (failure.exit().exit_code() != 0) return "rank_exit";
      return "other";
  }
}

void JobStats::AttemptFailed(const v1::RankFailure& failure, bool restarted) {
  const std::string label = CauseLabel(failure);
  ++attempt_failures_[label];
  if (restarted) ++restarts_[label];
}

void JobStats::Observe(Phase phase, int64_t since_mono_ms) {
  if (since_mono_ms <= 0) return;
  const int64_t ms = std::max<int64_t>(0, clock_.NowMonotonicMs() - since_mono_ms);
  Record(phase, static_cast<double>(ms) / 1000.0);
}

void JobStats::Record(Phase phase, double seconds) {
  if (durations_.size() >= kMaxQueued) durations_.pop_front();
  durations_.push_back({phase, seconds});
}

void JobStats::Finished(const std::string& id) {
  if (finished_.size() >= kMaxQueued) finished_.pop_front();
  finished_.push_back(id);
}

std::vector<JobStats::Duration> JobStats::TakeDurations() {
  std::vector<Duration> out(durations_.begin(), durations_.end());
  durations_.clear();
  return out;
}

std::vector<std::string> JobStats::TakeFinished() {
  std::vector<std::string> out(finished_.begin(), finished_.end());
  finished_.clear();
  return out;
}

}  // namespace convoy

#include "coordinator/control/job_stats.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace convoy {
namespace job_stats_test {

TEST(JobStatsTest, FailureCausesAreLabelledByTheTypedCauseNeverTheText) {
  // Issue 29: by the typed cause, never by the text (which holds what the rank said).
  v1::RankFailure f;
  f.set_reason(
      "rank 1 on worker w2 (10.0.0.2) exited with code 3: raised OSError: Network is "
      "unreachable; worker w2 (host) lost: hung:");
  f.mutable_exit()->set_exit_code(3);
  f.set_cause(v1::FAILURE_RANK_EXIT);
  EXPECT_EQ(JobStats::CauseLabel(f), "rank_exit");
  f.set_cause(v1::FAILURE_SIGNAL);
  EXPECT_EQ(JobStats::CauseLabel(f), "signal");
  f.set_cause(v1::FAILURE_WORKER_LOST);
  EXPECT_EQ(JobStats::CauseLabel(f), "worker_lost");
  f.set_cause(v1::FAILURE_HANG);
  EXPECT_EQ(JobStats::CauseLabel(f), "hang");
  f.set_cause(v1::FAILURE_OTHER);
  EXPECT_EQ(JobStats::CauseLabel(f), "other");
  // Recorded before causes were typed: the exit alone.
  f.clear_cause();
  EXPECT_EQ(JobStats::CauseLabel(f), "rank_exit");
  f.mutable_exit()->set_exit_code(0);
  f.mutable_exit()->set_signal(9);
  EXPECT_EQ(JobStats::CauseLabel(f), "signal");
  f.clear_exit();
  EXPECT_EQ(JobStats::CauseLabel(f), "other");
}

TEST(JobStatsTest, FailuresCountByCauseAndRestartsOnlyWhenTheJobRunsAgain) {
  FakeClock clock;
  JobStats stats(clock);
  v1::RankFailure lost;
  lost.set_cause(v1::FAILURE_WORKER_LOST);
  v1::RankFailure exit;
  exit.set_cause(v1::FAILURE_RANK_EXIT);
  stats.AttemptFailed(lost, /*restarted=*/true);
  stats.AttemptFailed(lost, /*restarted=*/false);  // an elastic resize, or no restarts left
  stats.AttemptFailed(exit, /*restarted=*/false);
  stats.Preempted("drain");
  stats.AttemptStarted();
  EXPECT_EQ(stats.attempt_failures(),
            (std::map<std::string, int64_t>{{"rank_exit", 1}, {"worker_lost", 2}}));
  EXPECT_EQ(stats.restarts(), (std::map<std::string, int64_t>{{"worker_lost", 1}}));
  EXPECT_EQ(stats.preemptions(), (std::map<std::string, int64_t>{{"drain", 1}}));
  EXPECT_EQ(stats.attempts_started(), 1);
}

TEST(JobStatsTest, ObservedPhasesAreTimedOnTheMonotonicClockAndUnknownStartsSkipped) {
  FakeClock clock;
  JobStats stats(clock);
  const int64_t placed = clock.NowMonotonicMs();
  clock.AdvanceMs(1500);
  clock.StepWallMs(-7200 * 1000);  // a wall-clock step changes nothing
  stats.Observe(JobStats::Phase::kRendezvous, placed);
  stats.Observe(JobStats::Phase::kFirstStep, 0);  // start not known (after a restart)
  const std::vector<JobStats::Duration> d = stats.TakeDurations();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].phase, JobStats::Phase::kRendezvous);
  EXPECT_DOUBLE_EQ(d[0].seconds, 1.5);
  EXPECT_TRUE(stats.TakeDurations().empty());
}

TEST(JobStatsTest, QueuesNobodyTakesStayAtTheirBoundKeepingTheNewest) {
  FakeClock clock;
  JobStats stats(clock);
  const size_t n = JobStats::kMaxQueued + 5;
  for (size_t i = 0; i < n; ++i) {
    stats.Record(JobStats::Phase::kQueue, static_cast<double>(i));
    stats.Finished("j-" + std::to_string(i));
  }
  const std::vector<JobStats::Duration> d = stats.TakeDurations();
  ASSERT_EQ(d.size(), JobStats::kMaxQueued);
  EXPECT_DOUBLE_EQ(d.front().seconds, 5);
  EXPECT_DOUBLE_EQ(d.back().seconds, static_cast<double>(n - 1));
  const std::vector<std::string> f = stats.TakeFinished();
  ASSERT_EQ(f.size(), JobStats::kMaxQueued);
  EXPECT_EQ(f.front(), "j-5");
  EXPECT_EQ(f.back(), "j-" + std::to_string(n - 1));
}

}  // namespace job_stats_test
}  // namespace convoy

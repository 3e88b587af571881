// How sweeps rank their trials (coordinator/state/sweep_ranking.h): which value is better, the
// best trial, ASHA's decisions at rungs; and a sweep's legal states
// (coordinator/state/job_state_machine.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "coordinator/state/job_state_machine.h"
#include "coordinator/state/sweep_ranking.h"

namespace convoy {
namespace sweep_ranking_test {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(SweepRanking, BetterFollowsTheGoalAndNanOrInfIsWorst) {
  EXPECT_TRUE(MetricBetter(0.9, 0.8, /*maximize=*/true));
  EXPECT_FALSE(MetricBetter(0.8, 0.9, true));
  EXPECT_TRUE(MetricBetter(0.1, 0.2, /*maximize=*/false));
  EXPECT_FALSE(MetricBetter(0.5, 0.5, false));
  EXPECT_TRUE(MetricBetter(1e9, kNan, false));
  EXPECT_FALSE(MetricBetter(kNan, 1e9, false));
  EXPECT_FALSE(MetricBetter(kInf, 0.1, true));  // a diverged value never wins
  EXPECT_TRUE(MetricBetter(-5, -kInf, true));
  EXPECT_FALSE(MetricBetter(kNan, kNan, true));
}

TEST(SweepRanking, TheBestTrialIsTheBestFiniteValueTheFirstOfEqualOnes) {
  EXPECT_EQ(BestOf({0.5, std::nullopt, 0.9, 0.9, kNan}, true), std::optional<size_t>(2));
  EXPECT_EQ(BestOf({0.5, std::nullopt, 0.9, 0.1}, false), std::optional<size_t>(3));
  EXPECT_EQ(BestOf({std::nullopt, kNan, kInf}, true), std::nullopt);
  EXPECT_EQ(BestOf({}, true), std::nullopt);
}

TEST(SweepRanking, RungsGrowByTheFactor) {
  AshaRungs asha({100, 3, true});
  EXPECT_EQ(asha.RungStep(0), 100);
  EXPECT_EQ(asha.RungStep(1), 300);
  EXPECT_EQ(asha.RungStep(2), 900);
  EXPECT_EQ(asha.RungStep(60), std::numeric_limits<int64_t>::max());  // saturates
}

TEST(SweepRanking, AshaStopsATrialOutsideTheTopThirdOnceThreeReachedTheRung) {
  AshaRungs asha({100, 3, /*maximize=*/true});
  EXPECT_FALSE(asha.Report(0, 50, 0.10));  // below the first rung: nothing recorded
  EXPECT_TRUE(asha.ValuesAt(0).empty());
  EXPECT_FALSE(asha.Report(0, 100, 0.84));  // alone at rung 100
  EXPECT_FALSE(asha.Report(1, 120, 0.80));  // two there: not yet judged
  // The third reaches it with the worst value: of 3, only the top 1 survives.
  auto stop = asha.Report(2, 200, 0.31);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->rung_step, 100);
  EXPECT_EQ(stop->step, 200);
  EXPECT_EQ(stop->reached, 3);
  EXPECT_EQ(stop->keep, 1);
  EXPECT_DOUBLE_EQ(stop->best, 0.84);
  EXPECT_EQ(AshaStopReason("test_accuracy", 3, *stop),
            "stopped early (ASHA): test_accuracy 0.31 at step 200 is not in the top 1/3 of 3 "
            "trials at that rung (best 0.84)");
  // A fourth with the best value goes on; a trial is recorded at a rung once.
  EXPECT_FALSE(asha.Report(3, 100, 0.9));
  EXPECT_FALSE(asha.Report(3, 110, 0.01));
  EXPECT_DOUBLE_EQ(asha.ValuesAt(0).at(3), 0.9);
  EXPECT_EQ(asha.ValuesAt(0).size(), 4u);
}

TEST(SweepRanking, AshaKeepsTheTopOfTheRungForMinimisationAndNanIsWorst) {
  AshaRungs asha({10, 2, /*maximize=*/false});
  EXPECT_FALSE(asha.Report(0, 10, 0.5));
  // Tied with the only other: not strictly worse, goes on.
  EXPECT_FALSE(asha.Report(1, 10, 0.5));
  // A diverged trial (NaN) at a later rung it reaches in one jump: recorded at 10, 20 and 40,
  // judged (and stopped) at the first.
  AshaRungs jump({10, 2, false});
  EXPECT_FALSE(jump.Report(0, 40, 0.3));
  auto stop = jump.Report(1, 45, kNan);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->rung_step, 10);
  EXPECT_TRUE(std::isnan(stop->value));
  EXPECT_EQ(jump.ValuesAt(2).size(), 2u);
  EXPECT_NE(AshaStopReason("loss", 2, *stop).find("loss nan at step 45"), std::string::npos);
}

TEST(SweepRanking, AWinnerReachingARungLastGoesOn) {
  AshaRungs asha({5, 3, /*maximize=*/false});
  EXPECT_FALSE(asha.Report(0, 5, 3.0));
  EXPECT_FALSE(asha.Report(1, 5, 2.0));
  EXPECT_FALSE(asha.Report(2, 5, 1.0));  // the best of three: kept
  EXPECT_TRUE(asha.Report(3, 5, 4.0));   // worst of 4 (keep 1)
  EXPECT_FALSE(asha.Report(4, 5, 0.5));  // a new best
  // Six at the rung keep the top two: third best is stopped, second best goes on.
  EXPECT_TRUE(asha.Report(5, 5, 1.8));   // 0.5 and 1.0 are better
  EXPECT_FALSE(asha.Report(6, 5, 0.8));  // of 7 (keep 2), only 0.5 is better
}

TEST(SweepStates, ASweepGoesPendingRunningThenEndsAndNothingElse) {
  EXPECT_TRUE(CheckTransition(v1::PENDING, v1::RUNNING, /*sweep=*/true).ok());
  EXPECT_TRUE(CheckTransition(v1::RUNNING, v1::SUCCEEDED, true).ok());
  EXPECT_TRUE(CheckTransition(v1::RUNNING, v1::FAILED, true).ok());
  EXPECT_TRUE(CheckTransition(v1::RUNNING, v1::CANCELLED, true).ok());
  EXPECT_TRUE(CheckTransition(v1::PENDING, v1::CANCELLED, true).ok());
  EXPECT_FALSE(CheckTransition(v1::PENDING, v1::SCHEDULED, true).ok());
  EXPECT_FALSE(CheckTransition(v1::RUNNING, v1::RESTARTING, true).ok());
  EXPECT_FALSE(CheckTransition(v1::SUCCEEDED, v1::RUNNING, true).ok());
  // An ordinary job still cannot skip placement.
  EXPECT_FALSE(CheckTransition(v1::PENDING, v1::RUNNING).ok());
}

}  // namespace sweep_ranking_test
}  // namespace convoy

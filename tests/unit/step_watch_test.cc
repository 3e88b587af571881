// Stragglers and collective hangs named from step records (coordinator/state/step_watch.h),
// with the times given: a fake clock, never a sleep.
#include "coordinator/state/step_watch.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace convoy {
namespace step_watch_test {

const std::map<int, std::string> kThree{{0, "w1"}, {1, "w2"}, {2, "w3"}};

// Feeds `steps` steps from `first`: every rank's all-reduce ends at the same time; rank
// `slow` then spends `extra_ms` more before it reports (a slow optimiser step, a sleep), and
// the step's period is `base_ms` plus that. Returns the time after the last step.
int64_t Feed(StepWatch& w, int64_t first, int steps, int64_t t, int64_t base_ms, int slow,
             int64_t extra_ms) {
  for (int64_t s = first; s < first + steps; ++s) {
    for (int r = 0; r < 3; ++r) {
      const int64_t at = t + base_ms + (r == slow ? extra_ms : r);  // a jitter of 1 ms
      w.OnRecord(r, s, at, at);
    }
    t += base_ms + (slow >= 0 ? extra_ms : 0);
  }
  return t;
}

TEST(StepWatchTest, ARankThreeTimesAsSlowIsNamedOnceItsWindowIsFull) {
  StepWatchOptions o;
  o.straggler_steps = 10;
  StepWatch w(o, kThree);
  int64_t t = Feed(w, 1, 8, 0, 100, 1, 200);
  EXPECT_TRUE(w.TakeChanges().empty());  // windows not full yet
  t = Feed(w, 9, 4, t, 100, 1, 200);
  auto changes = w.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_TRUE(changes[0].named);
  EXPECT_EQ(changes[0].rank.rank, 1);
  EXPECT_EQ(changes[0].rank.worker, "w2");
  EXPECT_NEAR(changes[0].rank.ratio, 3.0, 0.1);
  // Named at the first step where every rank had 10 step times (step 1 has no period).
  EXPECT_EQ(changes[0].at_step, 11);
  EXPECT_EQ(w.step_times().size(), 3u);
  // It recovers: with hysteresis it is cleared only once under the midpoint (1.25x).
  t = Feed(w, 13, 12, t, 100, -1, 0);
  changes = w.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_FALSE(changes[0].named);
  EXPECT_EQ(changes[0].rank.rank, 1);
}

TEST(StepWatchTest, JitterAndAnOffFactorNameNobody) {
  StepWatchOptions o;
  o.straggler_steps = 5;
  StepWatch w(o, kThree);
  Feed(w, 1, 30, 0, 100, 2, 20);  // 1.2x: under 1.5
  EXPECT_TRUE(w.TakeChanges().empty());
  o.straggler_factor = 0;
  StepWatch off(o, kThree);
  Feed(off, 1, 30, 0, 100, 1, 500);
  EXPECT_TRUE(off.TakeChanges().empty());
}

TEST(StepWatchTest, BusyTimeJudgesARankThatSaysIt) {
  StepWatchOptions o;
  o.straggler_steps = 4;
  StepWatch w(o, {{0, "w1"}, {1, "w2"}});
  // Both report at the same time (the slow work was before the all-reduce), but rank 0 says
  // it was busy 0.3 s of each step and rank 1 0.1 s.
  for (int s = 1; s <= 8; ++s) {
    w.OnRecord(0, s, s * 400, s * 400, 0.3);
    w.OnRecord(1, s, s * 400, s * 400, 0.1);
  }
  auto changes = w.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].rank.rank, 0);
  EXPECT_NEAR(changes[0].rank.ratio, 3.0, 0.01);
}

TEST(StepWatchTest, AHangIsNamedAfterHangStepsMedianPeriodsNotBefore) {
  StepWatchOptions o;
  o.hang_steps = 5;
  o.min_hang_ms = 300;
  StepWatch w(o, kThree);
  // Steps of 100 ms; at step 20 rank 2 stops before it reports, its peers report and block
  // in the next all-reduce.
  int64_t t = Feed(w, 1, 19, 0, 100, -1, 0);
  w.OnRecord(0, 20, t + 100, t + 100);
  w.OnRecord(1, 20, t + 101, t + 101);
  const int64_t last = t + 101;
  EXPECT_EQ(w.HangDueMs(), last + 500);
  EXPECT_FALSE(w.CheckHang(last + 499, {}).has_value());
  auto hang = w.CheckHang(last + 500, {});
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->rank, 2);
  EXPECT_EQ(hang->worker, "w3");
  EXPECT_NE(hang->reason.find("rank 2 on w3 reported last least recently (step 19"),
            std::string::npos)
      << hang->reason;
  EXPECT_NE(hang->reason.find("its peers reached step 20"), std::string::npos) << hang->reason;
  // A stopped process (SIGSTOP) is the suspect before a rank that is merely behind.
  hang = w.CheckHang(last + 500, {0});
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->rank, 0);
  EXPECT_NE(hang->reason.find("is stopped"), std::string::npos);
  // Any record re-arms it: the ranks were only pausing together.
  w.OnRecord(2, -1, last + 400, last + 400);
  EXPECT_FALSE(w.CheckHang(last + 500, {}).has_value());
}

TEST(StepWatchTest, AtEqualStepsTheRankThatReportedLeastRecentlyIsTheSuspect) {
  StepWatchOptions o;
  o.hang_steps = 3;
  o.min_hang_ms = 0;
  StepWatch w(o, kThree);
  int64_t t = Feed(w, 1, 10, 0, 100, -1, 0);
  w.OnRecord(1, 11, t + 50, t + 50);  // the first to report step 11, then silent
  w.OnRecord(0, 11, t + 90, t + 90);
  w.OnRecord(2, 11, t + 95, t + 95);
  w.OnRecord(0, -1, t + 120, t + 120);  // a record without a step still counts as alive
  auto hang = w.CheckHang(t + 120 + 300, {});
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->rank, 1);
}

TEST(StepWatchTest, NoHangBeforeEveryRankReportedOrWhenOff) {
  StepWatchOptions o;
  o.hang_steps = 3;
  o.min_hang_ms = 0;
  StepWatch w(o, kThree);
  for (int s = 1; s <= 10; ++s) {
    w.OnRecord(0, s, s * 100, s * 100);
    w.OnRecord(1, s, s * 100, s * 100);
  }
  EXPECT_EQ(w.HangDueMs(), 0);  // rank 2 never reported: still starting, not hung
  EXPECT_FALSE(w.CheckHang(1'000'000, {}).has_value());
  StepWatch off(StepWatchOptions{}, kThree);
  Feed(off, 1, 10, 0, 100, -1, 0);
  EXPECT_EQ(off.HangDueMs(), 0);
}

TEST(StepWatchTest, AGoneRankNeitherBlocksStepsNorIsASuspect) {
  StepWatchOptions o;
  o.hang_steps = 3;
  o.min_hang_ms = 0;
  o.straggler_steps = 3;
  StepWatch w(o, kThree);
  int64_t t = Feed(w, 1, 5, 0, 100, -1, 0);
  w.OnGone(2);
  for (int s = 6; s <= 12; ++s) {
    w.OnRecord(0, s, t + 100, t + 100);
    w.OnRecord(1, s, t + 100, t + 100);
    t += 100;
  }
  EXPECT_EQ(w.completed_steps(), 11);
  auto hang = w.CheckHang(t + 10'000, {});
  ASSERT_TRUE(hang.has_value());
  EXPECT_NE(hang->rank, 2);
}

TEST(StepWatchTest, MedianOfOddEvenAndEmpty) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

}  // namespace step_watch_test
}  // namespace convoy

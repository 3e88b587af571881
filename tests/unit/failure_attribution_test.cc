// Root cause and hang detection, table by table, with times given rather than slept.
#include "coordinator/failure_attribution.h"

#include <gtest/gtest.h>

namespace convoy {
namespace {

v1::RankFailure Failure(int rank, int code, int signal, bool by_worker = false) {
  v1::RankFailure f;
  f.set_rank(rank);
  f.mutable_exit()->set_exit_code(code);
  f.mutable_exit()->set_signal(signal);
  f.mutable_exit()->set_killed_by_worker(by_worker);
  return f;
}

TEST(ChooseRootCauseTest, AnOutsideSignalBeatsPeersThatFailedFirst) {
  // Rank 1's peers noticed first (their collectives broke), then rank 1's SIGKILL arrived.
  std::vector<v1::RankFailure> seen{Failure(0, 1, 0), Failure(2, 1, 0), Failure(1, 0, 9)};
  EXPECT_EQ(ChooseRootCause(seen).rank(), 1);
}

TEST(ChooseRootCauseTest, SignalsConvoySentAreNotCausesAndTheFirstOfEqualsWins) {
  std::vector<v1::RankFailure> seen{Failure(3, 0, 15, /*by_worker=*/true), Failure(2, 7, 0),
                                    Failure(1, 8, 0)};
  EXPECT_EQ(ChooseRootCause(seen).rank(), 3);  // all class 1: the first reported
  EXPECT_EQ(CauseClass(Failure(0, 0, 11)), 0);
  EXPECT_EQ(CauseClass(Failure(0, 0, 15, true)), 1);
  EXPECT_EQ(CauseClass(Failure(0, 2, 0)), 1);
}

TEST(DetectHangTest, NothingBeforeTheTimeoutAndNothingWithoutOne) {
  std::vector<RankLiveness> ranks{{0, false, false, 1000}, {1, false, false, 1000}};
  EXPECT_FALSE(DetectHang(ranks, 5999, 5).has_value());
  EXPECT_TRUE(DetectHang(ranks, 6000, 5).has_value());
  EXPECT_FALSE(DetectHang(ranks, 1'000'000, 0).has_value());
}

TEST(DetectHangTest, NamesTheSilentRanksWhenOthersProgress) {
  std::vector<RankLiveness> ranks{
      {0, false, false, 9000}, {1, false, false, 1000}, {2, true, false, 0}};
  auto hang = DetectHang(ranks, 10000, 5);
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->rank, 1);
  EXPECT_EQ(hang->reason, "hung: no progress for 5 s from rank 1");
}

TEST(DetectHangTest, AllSilentNamesNobodyButAStoppedRankIsBlamedOverItsWaitingPeers) {
  std::vector<RankLiveness> all{{0, false, false, 0}, {1, false, false, 0}};
  auto hang = DetectHang(all, 10000, 5);
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->reason, "hung: no progress for 5 s");
  // Rank 0 fell silent first, waiting in a collective for rank 1, whose process is stopped.
  std::vector<RankLiveness> stopped{{0, false, false, 0}, {1, false, true, 3000}};
  hang = DetectHang(stopped, 6000, 5);
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->rank, 1);
  EXPECT_EQ(hang->reason, "hung: no progress for 5 s from rank 1 (its process is stopped)");
}

}  // namespace
}  // namespace convoy

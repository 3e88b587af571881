// Root cause and hang detection, table by table, with times given rather than slept.
#include "coordinator/state/failure_attribution.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "common/clock.h"

namespace convoy {
namespace failure_attribution_test {

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

// ---- FailureAttribution: one attempt's window, deadline and hang checks on a fake clock

TEST(FailureAttributionTest, TheWindowCollectsErrorsUntilItCloses) {
  FakeClock clock;
  FailureAttribution fa(clock, 300);
  EXPECT_FALSE(fa.collecting());
  EXPECT_FALSE(fa.RootCause(nullptr).has_value());
  fa.Report(Failure(0, 1, 0));  // a peer's error opens the window
  clock.AdvanceMs(200);
  fa.Report(Failure(2, 1, 0));
  EXPECT_TRUE(fa.collecting());
  clock.AdvanceMs(99);
  EXPECT_FALSE(fa.RootCause(nullptr).has_value());  // 299 ms: still open
  clock.AdvanceMs(1);
  auto cause = fa.RootCause(nullptr);
  ASSERT_TRUE(cause.has_value());
  EXPECT_EQ(cause->rank(), 0);  // the first of equals
  // Not acted on (e.g. the transition could not be written): decided again later.
  EXPECT_TRUE(fa.collecting());
  EXPECT_EQ(fa.RootCause(nullptr)->rank(), 0);
  fa.Clear();
  EXPECT_FALSE(fa.collecting());
}

TEST(FailureAttributionTest, AnOutsideSignalClosesTheWindowAtOnce) {
  FakeClock clock;
  FailureAttribution fa(clock, 300);
  fa.Report(Failure(0, 1, 0));  // the peer's report arrives first and opens the window
  clock.AdvanceMs(20);
  EXPECT_FALSE(fa.RootCause(nullptr).has_value());
  fa.Report(Failure(1, 0, 9));  // SIGKILL from outside: nothing later can be likelier
  auto cause = fa.RootCause(nullptr);
  ASSERT_TRUE(cause.has_value());
  EXPECT_EQ(cause->rank(), 1);
  // Reported first, it is decided at once too (no restart waits 300 ms for nothing).
  FailureAttribution first(clock, 300);
  first.Report(Failure(3, 0, 9));
  ASSERT_TRUE(first.RootCause(nullptr).has_value());
  EXPECT_EQ(first.RootCause(nullptr)->rank(), 3);
}

TEST(FailureAttributionTest, EveryRankReportedClosesTheWindow) {
  FakeClock clock;
  FailureAttribution fa(clock, 300);
  fa.Report(Failure(0, 1, 0));
  EXPECT_FALSE(fa.RootCause(nullptr, /*all_reported=*/false).has_value());
  fa.Report(Failure(1, 1, 0));
  auto cause = fa.RootCause(nullptr, /*all_reported=*/true);
  ASSERT_TRUE(cause.has_value());
  EXPECT_EQ(cause->rank(), 0);
}

TEST(FailureAttributionTest, AnUnreachablePeerExplainsErrorsButNotAnOutsideSignal) {
  FakeClock clock;
  FailureAttribution fa(clock, 300);
  int asked = 0;
  auto peer = [&]() -> std::optional<v1::RankFailure> {
    ++asked;
    v1::RankFailure f;
    f.set_rank(5);
    f.set_reason("worker w5 became unreachable while its peers failed");
    return f;
  };
  fa.Report(Failure(0, 1, 0));
  clock.AdvanceMs(300);
  EXPECT_EQ(fa.RootCause(peer)->rank(), 5);
  EXPECT_EQ(asked, 1);
  fa.Clear();
  fa.Report(Failure(2, 0, 11));  // SIGSEGV: the cause itself
  clock.AdvanceMs(300);
  EXPECT_EQ(fa.RootCause(peer)->rank(), 2);
  EXPECT_EQ(asked, 1);  // not asked
  fa.Clear();
  fa.Report(Failure(3, 1, 0));
  clock.AdvanceMs(300);
  EXPECT_EQ(fa.RootCause([] { return std::optional<v1::RankFailure>(); })->rank(), 3);
}

TEST(FailureAttributionTest, ALostWorkerIsDecisive) {
  FakeClock clock;
  FailureAttribution fa(clock, 300);
  fa.Report(Failure(0, 1, 0));
  v1::RankFailure lost;
  lost.set_rank(4);
  lost.set_reason("worker w4 lost");
  EXPECT_EQ(fa.Decisive(lost).rank(), 4);
  EXPECT_FALSE(fa.collecting());
}

TEST(FailureAttributionTest, TheRendezvousDeadlineWaitsForAFailureBeingAttributed) {
  FakeClock clock;
  FailureAttribution fa(clock, 300);
  EXPECT_FALSE(fa.RendezvousOverdue());  // no deadline set
  fa.SetRendezvousDeadline(clock.NowMonotonicMs() + 5000);
  clock.AdvanceMs(4999);
  EXPECT_FALSE(fa.RendezvousOverdue());
  clock.AdvanceMs(1);
  EXPECT_TRUE(fa.RendezvousOverdue());
  fa.Report(Failure(0, 1, 0));
  EXPECT_FALSE(fa.RendezvousOverdue());  // the failure decides the attempt first
  EXPECT_EQ(RendezvousTimeoutReason({3, 5}), "rendezvous timed out: rank(s) 3, 5 did not start");
}

TEST(FailureAttributionTest, HangChecksLookAtTheRanksOnlyWhenAHangCanBeDue) {
  FakeClock clock;
  FailureAttribution fa(clock, 300);
  const int64_t t0 = clock.NowMonotonicMs();
  std::vector<RankLiveness> ranks{{0, false, false, t0}, {1, false, false, t0}};
  int scans = 0;
  auto liveness = [&] {
    ++scans;
    return ranks;
  };
  EXPECT_FALSE(fa.CheckHang(liveness, 5).has_value());
  EXPECT_EQ(scans, 1);
  for (int i = 0; i < 9; ++i) {  // 4.5 s of ticks: nothing can be due before t0 + 5 s
    clock.AdvanceMs(500);
    ranks[0].last_progress_ms = clock.NowMonotonicMs();  // rank 0 progresses
    EXPECT_FALSE(fa.CheckHang(liveness, 5).has_value());
  }
  EXPECT_EQ(scans, 1);
  clock.AdvanceMs(500);  // t0 + 5 s: rank 1 has been silent for the timeout
  auto hang = fa.CheckHang(liveness, 5);
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->rank, 1);
  EXPECT_EQ(scans, 2);
  EXPECT_FALSE(fa.CheckHang(liveness, 0).has_value());  // no timeout: never hung
}

TEST(FailureAttributionTest, AStoppedRankIsNamedWhenTheHangIsFound) {
  FakeClock clock;
  FailureAttribution fa(clock, 300);
  const int64_t t0 = clock.NowMonotonicMs();
  std::vector<RankLiveness> ranks{{0, false, false, t0}, {1, false, true, t0 + 1000}};
  clock.AdvanceMs(5000);
  auto hang = fa.CheckHang([&] { return ranks; }, 5);
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->rank, 1);
  EXPECT_EQ(hang->reason, "hung: no progress for 5 s from rank 1 (its process is stopped)");
}

}  // namespace failure_attribution_test
}  // namespace convoy

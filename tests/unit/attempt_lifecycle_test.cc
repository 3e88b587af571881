// The attempt lifecycle on its own: placement, rendezvous, run and teardown of one attempt,
// with the real table, ledger, statistics and writer over the in-memory store, and a fake
// worker channel (tests/support/controllers_fixture.h).
#include "coordinator/control/attempt_lifecycle.h"

#include <gtest/gtest.h>

#include "coordinator/state/fault_origin.h"
#include "tests/support/controllers_fixture.h"

namespace convoy {
namespace attempt_lifecycle_test {

class AttemptLifecycleTest : public ControllersFixture {
 protected:
  AttemptLifecycleTest() {
    AddWorker("w1");
    AddWorker("w2");
    on_released_ = [this] { ++released_; };
  }

  v1::ProcessExited Exit(const JobRecord& r, int rank, int code) {
    v1::ProcessExited e;
    e.set_job_id(r.job.id());
    e.set_job_uid(r.job.uid());
    e.set_attempt(r.rt.attempt);
    e.set_rank(rank);
    e.mutable_exit()->set_exit_code(code);
    return e;
  }
  // Node 0 reserves port 29500 and every rank starts.
  void Start(JobRecord& r) {
    v1::PortReserved port;
    port.set_job_id(r.job.id());
    port.set_job_uid(r.job.uid());
    port.set_attempt(r.rt.attempt);
    port.set_port(29500);
    lifecycle_.OnPortReserved("w1", port);
    for (const auto& [worker, launch] : channel_.Take(v1::CoordinatorMessage::kLaunch)) {
      v1::ProcessStarted s;
      s.set_job_id(r.job.id());
      s.set_job_uid(r.job.uid());
      s.set_attempt(r.rt.attempt);
      s.set_rank(launch.launch().group_rank());
      s.set_pid(100 + launch.launch().group_rank());
      lifecycle_.OnProcessStarted(worker, s);
    }
  }

  int released_ = 0;
};

TEST_F(AttemptLifecycleTest, AnAttemptGoesFromPlacementThroughRendezvousToSuccessAndRelease) {
  JobRecord& r = Job(2);
  ASSERT_TRUE(lifecycle_.Place(r, {"w1", "w2"}));
  EXPECT_EQ(r.job.state(), v1::RENDEZVOUS);
  EXPECT_EQ(ledger_.used_slots(), 2);
  EXPECT_EQ(table_.JobsOn("w2"), std::vector<std::string>{r.job.id()});
  const auto reserve = channel_.Take(v1::CoordinatorMessage::kReservePort);
  ASSERT_EQ(reserve.size(), 1u);
  EXPECT_EQ(reserve[0].first, "w1");  // node 0

  Start(r);
  EXPECT_EQ(r.job.state(), v1::RUNNING);
  EXPECT_EQ(r.job.attempts(0).master_port(), 29500);
  lifecycle_.OnProcessExited("w1", Exit(r, 0, 0));
  EXPECT_EQ(r.job.state(), v1::RUNNING);  // one rank of two
  EXPECT_EQ(ledger_.used_slots(), 1);
  lifecycle_.OnProcessExited("w2", Exit(r, 1, 0));
  EXPECT_EQ(r.job.state(), v1::SUCCEEDED);
  EXPECT_EQ(ledger_.used_slots(), 0);
  EXPECT_TRUE(r.rt.released);
  EXPECT_TRUE(table_.attached().empty());
  EXPECT_EQ(released_, 1);
  EXPECT_EQ(stats_.attempts_started(), 1);
}

TEST_F(AttemptLifecycleTest, AFailedRankRestartsTheJobOnceItsPeersAreGone) {
  JobRecord& r = Job(2, /*max_restarts=*/1);
  ASSERT_TRUE(lifecycle_.Place(r, {"w1", "w2"}));
  Start(r);
  lifecycle_.OnProcessExited("w2", Exit(r, 1, 3));
  // The failure window: the root cause is decided when it closes, or when every rank is gone.
  lifecycle_.OnProcessExited("w1", Exit(r, 0, 1));
  EXPECT_EQ(r.job.state(), v1::RESTARTING);
  EXPECT_EQ(r.job.restarts(), 1);
  EXPECT_EQ(r.job.attempts(0).failure().rank(), 1);
  EXPECT_EQ(r.job.attempts(0).failure().cause(), v1::FAILURE_RANK_EXIT);
  EXPECT_EQ(stats_.restarts().at("rank_exit"), 1);
  EXPECT_TRUE(r.rt.released);  // every rank gone: nothing held
  EXPECT_EQ(ledger_.used_slots(), 0);
}

TEST_F(AttemptLifecycleTest, ALostWorkerFailsTheAttemptAtOnceAndItsPeersAreKilled) {
  JobRecord& r = Job(2);
  // Its free moves off sick nodes used up (README "When nodes are sick"): a lost worker fails
  // it like any other failure without restarts left.
  r.job.set_node_moves(kMaxFreeNodeMoves);
  ASSERT_TRUE(lifecycle_.Place(r, {"w1", "w2"}));
  Start(r);
  lifecycle_.OnWorkerLost(r, "w2");
  EXPECT_EQ(r.job.state(), v1::FAILED);
  EXPECT_EQ(r.job.attempts(0).failure().cause(), v1::FAILURE_WORKER_LOST);
  const auto kills = channel_.Take(v1::CoordinatorMessage::kKill);
  ASSERT_EQ(kills.size(), 1u);  // w1's rank; w2's is gone with it
  EXPECT_EQ(kills[0].first, "w1");
  EXPECT_FALSE(r.rt.released);  // until w1's rank is reported gone, or the deadline
  EXPECT_EQ(ledger_.used_slots(), 1);
  clock_.AdvanceMs(3000 + 10000);
  lifecycle_.Check(r);
  EXPECT_TRUE(r.rt.released);
  EXPECT_EQ(ledger_.used_slots(), 0);
}

TEST_F(AttemptLifecycleTest, ARendezvousThatNeverCompletesFailsAtItsDeadline) {
  JobRecord& r = Job(2);
  ASSERT_TRUE(lifecycle_.Place(r, {"w1", "w2"}));
  clock_.AdvanceMs(59999);
  lifecycle_.Check(r);
  EXPECT_EQ(r.job.state(), v1::RENDEZVOUS);
  clock_.AdvanceMs(1);
  lifecycle_.Check(r);
  EXPECT_EQ(r.job.state(), v1::FAILED);
  EXPECT_EQ(r.job.attempts(0).failure().cause(), v1::FAILURE_OTHER);
}

TEST_F(AttemptLifecycleTest, APlacementThatCannotBePersistedChangesNothing) {
  JobRecord& r = Job(1);
  store_.FailNextWrite();
  EXPECT_FALSE(lifecycle_.Place(r, {"w1"}));
  EXPECT_EQ(r.job.state(), v1::PENDING);
  EXPECT_EQ(r.job.attempts_size(), 0);
  EXPECT_EQ(ledger_.used_slots(), 0);
  EXPECT_TRUE(table_.attached().empty());
  EXPECT_TRUE(channel_.Take(v1::CoordinatorMessage::kReservePort).empty());
}

TEST_F(AttemptLifecycleTest, APreemptedAttemptWaitsAgainWithoutUsingARestart) {
  JobRecord& r = Job(1);
  ASSERT_TRUE(lifecycle_.Place(r, {"w1"}));
  Start(r);
  ASSERT_TRUE(lifecycle_.Preempt(r, "a job of higher priority", "priority"));
  EXPECT_EQ(r.job.state(), v1::PENDING);
  EXPECT_EQ(r.job.restarts(), 0);
  EXPECT_EQ(r.job.preemptions(), 1);
  const auto kills = channel_.Take(v1::CoordinatorMessage::kKill);
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_TRUE(kills[0].second.kill().preempt());
  EXPECT_EQ(kills[0].second.kill().grace_ms(), 30000);
  EXPECT_FALSE(lifecycle_.Preempt(r, "again", "priority"));  // already stopping
}

}  // namespace attempt_lifecycle_test
}  // namespace convoy

// The scheduling controller on its own, with the real table, ledger, writer and lifecycle
// over the in-memory store: when a pass runs, what it places, why the rest waits, and
// max_runtime.
#include "coordinator/control/scheduling.h"

#include <gtest/gtest.h>

#include "tests/support/controllers_fixture.h"

namespace convoy {
namespace scheduling_test {

class SchedulingTest : public ControllersFixture {
 protected:
  SchedulingTest() {
    on_released_ = [this] { sched_.Needed(); };
  }
  JobRecord& Job(int nodes, const std::string& owner = "alice", int max_runtime_s = 0) {
    return ControllersFixture::Job(nodes, /*max_restarts=*/0, owner, max_runtime_s);
  }

  SchedulingController sched_{clock_, {}, table_, ledger_, lifecycle_, writer_, registry_};
};

TEST_F(SchedulingTest, APassPlacesWhatFitsAndSaysWhyTheRestWaits) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  JobRecord& a = Job(2);
  JobRecord& b = Job(1);
  sched_.Pass();
  EXPECT_EQ(a.job.state(), v1::RENDEZVOUS);
  EXPECT_EQ(b.job.state(), v1::PENDING);
  EXPECT_FALSE(b.job.pending_reason().empty());
  EXPECT_EQ(b.job.queue_position(), 1);
  EXPECT_EQ(ledger_.used_slots(), 2);
}

TEST_F(SchedulingTest, APassRunsAtTheTickOnlyWhenNeededOrDue) {
  JobRecord& a = Job(1);
  sched_.Pass();  // no worker yet: it waits
  ASSERT_EQ(a.job.state(), v1::PENDING);
  AddWorker("w1", 1);
  sched_.Tick();  // nothing said a pass is needed, and the next is not due
  EXPECT_EQ(a.job.state(), v1::PENDING);
  sched_.Needed();  // a worker became ready
  sched_.Tick();
  EXPECT_EQ(a.job.state(), v1::RENDEZVOUS);
  // Without Needed, a pass still runs every reschedule interval while jobs wait.
  AddWorker("w2", 1);
  JobRecord& b = Job(1);
  sched_.Tick();
  EXPECT_EQ(b.job.state(), v1::PENDING);
  clock_.AdvanceMs(SchedulingController::Options{}.reschedule_interval_ms);
  sched_.Tick();
  EXPECT_EQ(b.job.state(), v1::RENDEZVOUS);
}

TEST_F(SchedulingTest, AJobPastItsMaxRuntimeIsStoppedOnTheMonotonicClock) {
  AddWorker("w1", 1);
  JobRecord& a = Job(1, "alice", /*max_runtime_s=*/60);
  sched_.Pass();
  ASSERT_EQ(a.job.state(), v1::RENDEZVOUS);
  clock_.StepWallMs(2 * 3600 * 1000);  // NTP: no time passed
  clock_.AdvanceMs(1000);
  sched_.Tick();
  EXPECT_EQ(a.job.state(), v1::RENDEZVOUS);
  clock_.AdvanceMs(60000);
  sched_.Tick();
  EXPECT_EQ(a.job.state(), v1::FAILED);
  EXPECT_NE(a.job.message().find("max_runtime of 60 s exceeded"), std::string::npos);
  EXPECT_EQ(channel_.Take(v1::CoordinatorMessage::kKill).size(), 1u);
}

TEST_F(SchedulingTest, PreemptibleIsTheSpecsWordElseAPriorityBelowTheThreshold) {
  v1::JobSpec spec;
  spec.set_priority(-1);
  EXPECT_TRUE(sched_.IsPreemptible(spec));
  spec.set_priority(0);
  EXPECT_FALSE(sched_.IsPreemptible(spec));
  spec.set_preemptible(true);
  EXPECT_TRUE(sched_.IsPreemptible(spec));
}

}  // namespace scheduling_test
}  // namespace convoy

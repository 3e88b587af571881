// The worker registry (coordinator/state/worker_registry.h; not named worker_* because that prefix
// links the worker library) on a fake clock: states, counts kept as they change, expiry in the
// order workers were last heard from.
#include "coordinator/state/worker_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace convoy {
namespace registry_test {

v1::Register Reg(const std::string& name, int slots) {
  v1::Register reg;
  reg.set_name(name);
  reg.set_address("10.0.0.1");
  reg.set_slots(slots);
  return reg;
}

TEST(WorkerRegistryTest, CountsAndReadySlotsFollowEveryChange) {
  FakeClock clock;
  WorkerRegistry reg(clock, 10000);
  reg.OnRegister(Reg("a", 2));
  reg.OnRegister(Reg("b", 4));
  EXPECT_EQ(reg.counts().at(v1::WORKER_READY), 2);
  EXPECT_EQ(reg.ready_slots(), 6);
  reg.OnRegister(Reg("b", 8));  // re-registers with more slots
  EXPECT_EQ(reg.counts().at(v1::WORKER_READY), 2);
  EXPECT_EQ(reg.ready_slots(), 10);
  reg.OnDisconnect("a");
  EXPECT_EQ(reg.counts().at(v1::WORKER_READY), 1);
  EXPECT_EQ(reg.counts().at(v1::WORKER_UNREACHABLE), 1);
  EXPECT_EQ(reg.ready_slots(), 8);
  EXPECT_FALSE(reg.IsReady("a"));
  clock.AdvanceMs(10000);
  reg.OnHeard("b");
  EXPECT_EQ(reg.ExpireLost(), std::vector<std::string>{"a"});
  EXPECT_EQ(reg.counts().count(v1::WORKER_UNREACHABLE), 0u);
  EXPECT_EQ(reg.counts().at(v1::WORKER_LOST), 1);
  reg.OnHeard("a");  // a message does not revive a lost worker ...
  EXPECT_EQ(reg.Find("a")->state(), v1::WORKER_LOST);
  reg.OnRegister(Reg("a", 2));  // ... a registration does
  EXPECT_EQ(reg.counts().at(v1::WORKER_READY), 2);
  EXPECT_EQ(reg.counts().count(v1::WORKER_LOST), 0u);
  EXPECT_EQ(reg.ready_slots(), 10);
  ASSERT_EQ(reg.Ready().size(), 2u);
  EXPECT_EQ(reg.List().size(), 2u);
}

TEST(WorkerRegistryTest, WorkersExpireInTheOrderTheyFellSilentEachOnce) {
  FakeClock clock;
  WorkerRegistry reg(clock, 1000);
  for (const char* name : {"a", "b", "c", "d"}) {
    reg.OnRegister(Reg(name, 1));
    clock.AdvanceMs(100);
  }
  reg.OnHeard("a");      // a is now the most recently heard
  clock.AdvanceMs(850);  // b: 1150 ms silent; c: 1050; d: 950; a: 850
  EXPECT_EQ(reg.ExpireLost(), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(reg.ExpireLost().empty());  // each name once
  clock.AdvanceMs(150);
  EXPECT_EQ(reg.ExpireLost(), (std::vector<std::string>{"d", "a"}));
  EXPECT_EQ(reg.counts().at(v1::WORKER_LOST), 4);
  EXPECT_EQ(reg.ready_slots(), 0);
}

TEST(WorkerRegistryTest, RestoredWorkersAreUnreachableWithAFullTimeoutToComeBack) {
  FakeClock clock;
  WorkerRegistry reg(clock, 1000);
  v1::WorkerInfo stored;
  stored.set_name("a");
  stored.set_slots(4);
  stored.set_state(v1::WORKER_READY);
  stored.set_used_slots(3);
  stored.add_jobs("j-000001");
  reg.Restore(stored);
  EXPECT_EQ(reg.Find("a")->state(), v1::WORKER_UNREACHABLE);
  EXPECT_EQ(reg.Find("a")->used_slots(), 0);
  EXPECT_EQ(reg.Find("a")->jobs_size(), 0);
  EXPECT_EQ(reg.counts().at(v1::WORKER_UNREACHABLE), 1);
  EXPECT_EQ(reg.ready_slots(), 0);
  clock.AdvanceMs(999);
  EXPECT_TRUE(reg.ExpireLost().empty());
  reg.OnRegister(Reg("a", 4));
  EXPECT_EQ(reg.ready_slots(), 4);
  EXPECT_EQ(reg.counts().size(), 1u);
  clock.AdvanceMs(999);
  EXPECT_TRUE(reg.ExpireLost().empty());
}

TEST(WorkerRegistryTest, AForgottenWorkerLeavesEveryCountAndExpiresNoMore) {
  FakeClock clock;
  WorkerRegistry reg(clock, 1000);
  reg.OnRegister(Reg("a", 2));
  reg.OnRegister(Reg("b", 4));
  reg.OnRegister(Reg("c", 8));
  reg.OnDisconnect("b");
  EXPECT_FALSE(reg.Forget("nobody"));
  // READY and UNREACHABLE (the registry itself refuses nothing: JobManager decides).
  EXPECT_TRUE(reg.Forget("a"));
  EXPECT_TRUE(reg.Forget("b"));
  EXPECT_EQ(reg.Find("a"), nullptr);
  EXPECT_EQ(reg.counts().count(v1::WORKER_UNREACHABLE), 0u);
  EXPECT_EQ(reg.counts().at(v1::WORKER_READY), 1);
  EXPECT_EQ(reg.ready_slots(), 8);
  // Neither expires later (their places in the heard order went with them).
  clock.AdvanceMs(1000);
  EXPECT_EQ(reg.ExpireLost(), std::vector<std::string>{"c"});
  EXPECT_TRUE(reg.Forget("c"));  // LOST
  EXPECT_TRUE(reg.counts().empty());
  EXPECT_TRUE(reg.List().empty());
  EXPECT_FALSE(reg.Forget("c"));
  // The name registering again is a new worker.
  reg.OnRegister(Reg("c", 2));
  EXPECT_EQ(reg.counts().at(v1::WORKER_READY), 1);
  EXPECT_EQ(reg.ready_slots(), 2);
  EXPECT_FALSE(reg.Find("c")->drained());
}

}  // namespace registry_test
}  // namespace convoy

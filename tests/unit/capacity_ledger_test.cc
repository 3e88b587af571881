#include "coordinator/sched/capacity_ledger.h"

#include <gtest/gtest.h>

namespace convoy {
namespace capacity_ledger_test {

v1::RankResources Res(std::vector<int> gpus, int cpus = 0, int64_t memory = 0) {
  v1::RankResources r;
  for (int g : gpus) r.add_gpus(g);
  r.set_cpus(cpus);
  r.set_memory_bytes(memory);
  return r;
}

v1::WorkerInfo Worker(const std::string& name, int slots, int gpus, int cores, int64_t memory) {
  v1::WorkerInfo w;
  w.set_name(name);
  w.set_slots(slots);
  for (int g = 0; g < gpus; ++g) w.add_gpus(g);
  w.set_cores(cores);
  w.set_memory_bytes(memory);
  return w;
}

TEST(CapacityLedgerTest, HoldsAreSummedPerWorkerAndGivenBackToNothing) {
  CapacityLedger ledger;
  ledger.Take("w1", Res({0}, 2, 1000));
  ledger.Take("w1", Res({2}, 1, 500));
  ledger.Take("w2", Res({}));
  EXPECT_EQ(ledger.UsedSlots("w1"), 2);
  EXPECT_EQ(ledger.UsedSlots("w2"), 1);
  EXPECT_EQ(ledger.UsedSlots("w3"), 0);
  EXPECT_EQ(ledger.used_slots(), 3);

  v1::WorkerInfo w1 = Worker("w1", 4, 4, 8, 4000);
  ledger.AddUse(w1);
  EXPECT_EQ(w1.used_slots(), 2);
  EXPECT_EQ(w1.used_cpus(), 3);
  EXPECT_EQ(w1.used_memory_bytes(), 1500);
  EXPECT_EQ(std::vector<int>(w1.used_gpus().begin(), w1.used_gpus().end()),
            (std::vector<int>{0, 2}));

  ledger.Give("w1", Res({0}, 2, 1000));
  ledger.Give("w1", Res({2}, 1, 500));
  ledger.Give("w2", Res({}));
  EXPECT_EQ(ledger.used_slots(), 0);
  EXPECT_EQ(ledger.workers_in_use(), 0u);  // no entry stays behind
}

TEST(CapacityLedgerTest, FreeCapacityIsWhatTheWorkerHasLessWhatIsHeld) {
  CapacityLedger ledger;
  const v1::WorkerInfo w = Worker("w1", 4, 4, 8, 4000);
  ledger.Take("w1", Res({1}, 3, 1000));
  const WorkerCapacity c = ledger.CapacityOf(w);
  EXPECT_EQ(c.name, "w1");
  EXPECT_EQ(c.free_slots, 3);
  EXPECT_EQ(c.gpus, 4);
  EXPECT_EQ(c.free_gpus, 3);
  EXPECT_EQ(c.free_cpus, 5);
  EXPECT_EQ(c.free_memory, 3000);
  EXPECT_EQ(ledger.FreeGpus(w), (std::vector<int>{0, 2, 3}));
  // A worker that reports no memory is not checked for it (-1), and cores never go below 0.
  ledger.Take("w2", Res({}, 9));
  const WorkerCapacity c2 = ledger.CapacityOf(Worker("w2", 2, 0, 4, 0));
  EXPECT_EQ(c2.free_memory, -1);
  EXPECT_EQ(c2.free_cpus, 0);
  EXPECT_EQ(c2.free_slots, 1);
}

}  // namespace capacity_ledger_test
}  // namespace convoy

#include "coordinator/sched/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "coordinator/sched/rendezvous_planner.h"

namespace convoy {
namespace scheduler_test {

v1::JobSpec Spec(int nodes, int procs) {
  v1::JobSpec spec;
  spec.set_name("t");
  spec.set_nodes(nodes);
  spec.set_procs_per_node(procs);
  return spec;
}

WaitingJob W(const std::string& id, const v1::JobSpec* spec, std::vector<std::string> preferred) {
  WaitingJob w;
  w.id = id;
  w.spec = spec;
  w.preferred = std::move(preferred);
  return w;
}

TEST(PlaceGangTest, AllOrNothing) {
  std::vector<WorkerCapacity> workers{{"a", 2, 0}, {"b", 1, 0}, {"c", 0, 0}};
  EXPECT_FALSE(PlaceGang(Spec(3, 1), workers, {}).has_value());  // c has no room
  EXPECT_FALSE(PlaceGang(Spec(2, 2), workers, {}).has_value());  // b has 1 slot
  auto two = PlaceGang(Spec(2, 1), workers, {});
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(*two, (std::vector<std::string>{"a", "b"}));  // most free slots first
  auto one = PlaceGang(Spec(1, 2), workers, {});
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(*one, std::vector<std::string>{"a"});
}

TEST(PlaceGangTest, NodesAreDistinctWorkers) {
  std::vector<WorkerCapacity> workers{{"a", 8, 0}};
  EXPECT_FALSE(PlaceGang(Spec(2, 1), workers, {}).has_value());
}

TEST(PlaceGangTest, PreferredWorkersKeepTheirOrder) {
  std::vector<WorkerCapacity> workers{{"a", 4, 0}, {"b", 1, 0}, {"c", 1, 0}};
  auto chosen = PlaceGang(Spec(2, 1), workers, {"c", "b"});
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(*chosen, (std::vector<std::string>{"c", "b"}));
  // A preferred worker that is gone is replaced by the best other one.
  workers = {{"a", 4, 0}, {"b", 1, 0}};
  chosen = PlaceGang(Spec(2, 1), workers, {"c", "b"});
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(*chosen, (std::vector<std::string>{"b", "a"}));
}

TEST(PlaceGangTest, GpuProcsPerNode) {
  v1::JobSpec spec = Spec(1, 0);
  spec.set_procs_per_node_gpu(true);
  EXPECT_FALSE(PlaceGang(spec, {{"cpu", 8, 0}}, {}).has_value());
  auto chosen = PlaceGang(spec, {{"cpu", 8, 0}, {"gpu", 4, 4}}, {});
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(*chosen, std::vector<std::string>{"gpu"});
}

TEST(RendezvousPlannerTest, RanksAreGroupRankTimesProcsPlusLocalRank) {
  auto nodes = PlanRanks({{"w1", "10.0.0.1", 2}, {"w2", "10.0.0.2", 2}, {"w3", "10.0.0.3", 2}});
  ASSERT_EQ(nodes.size(), 3u);
  for (int g = 0; g < 3; ++g) {
    EXPECT_EQ(nodes[g].group_rank(), g);
    ASSERT_EQ(nodes[g].ranks_size(), 2);
    EXPECT_EQ(nodes[g].ranks(0), g * 2);
    EXPECT_EQ(nodes[g].ranks(1), g * 2 + 1);
  }
  v1::JobSpec spec = Spec(3, 2);
  spec.set_max_restarts(4);
  v1::Launch launch = PlanLaunch("j-000001", 2, spec, nodes, 1, 41234);
  EXPECT_EQ(launch.group_rank(), 1);
  EXPECT_EQ(launch.num_nodes(), 3);
  EXPECT_EQ(launch.local_world_size(), 2);
  EXPECT_EQ(launch.world_size(), 6);
  EXPECT_EQ(launch.master_addr(), "10.0.0.1");  // node 0's address
  EXPECT_EQ(launch.master_port(), 41234);
  EXPECT_EQ(launch.restart_count(), 2);
  EXPECT_EQ(launch.max_restarts(), 4);
  EXPECT_EQ(launch.run_id(), "j-000001");
}

}  // namespace scheduler_test
}  // namespace convoy

namespace convoy {
namespace scheduler_test {

v1::JobSpec Gang(int nodes, int procs) {
  v1::JobSpec spec;
  spec.set_name("g");
  spec.set_nodes(nodes);
  spec.set_procs_per_node(procs);
  return spec;
}

TEST(FifoSchedulerTest, PlacesInOrderTakesSlotsAndBackfillsPastAJobThatDoesNotFit) {
  const v1::JobSpec big = Gang(3, 1), small = Gang(1, 1), second = Gang(2, 1);
  std::vector<WaitingJob> waiting{W("j-1", &big, {}), W("j-2", &small, {}), W("j-3", &second, {})};
  std::vector<WorkerCapacity> capacity{{"a", 1, 0}, {"b", 2, 0}};
  auto placed = FifoScheduler().Schedule(waiting, capacity);
  // j-1 needs 3 workers of 2: waits. j-2 takes b (most free slots). j-3 then needs 2 workers
  // with a free slot: a and b (1 left) - it fits.
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[0].id, "j-2");
  EXPECT_EQ(placed[0].workers, std::vector<std::string>{"b"});
  EXPECT_EQ(placed[1].id, "j-3");
  EXPECT_EQ(placed[1].workers.size(), 2u);
}

TEST(FifoSchedulerTest, AnEarlierJobKeepsTheSlotsALaterOneWanted) {
  const v1::JobSpec one = Gang(1, 2);
  std::vector<WaitingJob> waiting{W("j-1", &one, {}), W("j-2", &one, {"a"})};
  auto placed = FifoScheduler().Schedule(waiting, {{"a", 2, 0}});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].id, "j-1");
}

TEST(PlaceGangTest, ARestartOfTenThousandNodesKeepsEveryNodeOnItsWorker) {
  constexpr int kNodes = 10000;
  std::vector<WorkerCapacity> workers;
  std::vector<std::string> preferred;
  for (int i = 0; i < kNodes + 10; ++i) {
    workers.push_back({"w" + std::to_string(i), 1 + i % 3, 0});
  }
  for (int i = kNodes - 1; i >= 0; --i) preferred.push_back("w" + std::to_string(i));
  preferred[17] = "gone";  // a worker of the previous attempt that left
  auto chosen = PlaceGang(Gang(kNodes, 1), workers, preferred);
  ASSERT_TRUE(chosen.has_value());
  ASSERT_EQ(chosen->size(), static_cast<size_t>(kNodes));
  for (int n = 0; n < 17; ++n) EXPECT_EQ((*chosen)[n], preferred[n]);
  EXPECT_EQ((*chosen)[17], preferred[18]);  // the rest keep their order, then the best others
  // The replacement is the best of the others: most free slots (3: i % 3 == 2), then name.
  EXPECT_EQ(chosen->back(), "w10001");
}

TEST(PlaceGangTest, OnlyTheBestOthersAreChosenInOrder) {
  std::vector<WorkerCapacity> workers{{"d", 1, 0}, {"a", 2, 0}, {"c", 3, 0}, {"b", 2, 0}};
  auto chosen = PlaceGang(Gang(3, 1), workers, {"d"});
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(*chosen, (std::vector<std::string>{"d", "c", "a"}));
}

// Issue 16: with `procs_per_node: gpu`, a 4-GPU and a 2-GPU worker must never share a gang
// (ranks 0-3 and 2-3 in a WORLD_SIZE of 6). A property over random clusters: every placement
// has one GPU count, fits every chosen worker, and is found whenever some GPU count has enough
// fitting workers.
TEST(PlaceGangTest, GpuGangsNeverMixGpuCountsOnRandomClusters) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 2000; ++round) {
    std::vector<WorkerCapacity> workers;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      const int gpus = static_cast<int>(rng() % 5);  // 0 to 4
      workers.push_back({"w" + std::to_string(i), static_cast<int>(rng() % 6), gpus});
    }
    v1::JobSpec spec;
    spec.set_nodes(1 + static_cast<int>(rng() % 4));
    spec.set_procs_per_node_gpu(true);
    std::vector<std::string> preferred;
    if (rng() % 3 == 0) preferred.push_back("w" + std::to_string(rng() % n));
    auto chosen = PlaceGang(spec, workers, preferred);
    std::map<int, int> fitting;  // GPU count -> workers with room for one process per GPU
    for (const auto& w : workers) {
      if (w.gpus > 0 && w.free_slots >= w.gpus) ++fitting[w.gpus];
    }
    bool possible = false;
    for (const auto& [gpus, count] : fitting) possible = possible || count >= spec.nodes();
    ASSERT_EQ(chosen.has_value(), possible) << "round " << round;
    if (!chosen) continue;
    ASSERT_EQ(static_cast<int>(chosen->size()), spec.nodes());
    std::set<int> counts;
    for (const std::string& name : *chosen) {
      for (const auto& w : workers) {
        if (w.name != name) continue;
        counts.insert(w.gpus);
        EXPECT_GE(w.free_slots, w.gpus);
        EXPECT_GT(w.gpus, 0);
      }
    }
    EXPECT_EQ(counts.size(), 1u) << "round " << round << ": a gang of mixed GPU counts";
  }
}

TEST(PlaceGangTest, GpuGangPrefersTheMostProcessesPerNode) {
  v1::JobSpec spec;
  spec.set_nodes(2);
  spec.set_procs_per_node_gpu(true);
  std::vector<WorkerCapacity> workers{{"a", 4, 4}, {"b", 2, 2}, {"c", 2, 2}, {"d", 4, 4}};
  auto chosen = PlaceGang(spec, workers, {});
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(std::set<std::string>(chosen->begin(), chosen->end()),
            (std::set<std::string>{"a", "d"}));
  // Before: a (4 GPUs) and b (2 GPUs) was a possible answer.
  workers[3].free_slots = 0;
  chosen = PlaceGang(spec, workers, {});
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(std::set<std::string>(chosen->begin(), chosen->end()),
            (std::set<std::string>{"b", "c"}));
}

// A GPU job on workers without GPUs says so (issue 32: it read "a GPU per process (0-0)").
TEST(WhyNoFitTest, GpuJobOnWorkersWithoutGpusSaysNoneHasOne) {
  v1::JobSpec spec;
  spec.set_nodes(1);
  spec.set_procs_per_node_gpu(true);
  const std::string none = WhyNoFit(spec, {{"a", 2, 0}, {"b", 2, 0}});
  EXPECT_EQ(none, "needs 1 worker with a GPU per process (no worker has enough); 0 have them now");
  EXPECT_EQ(none.find("0-0"), std::string::npos);
  const std::string some = WhyNoFit(spec, {{"a", 0, 2}, {"b", 0, 4}});
  EXPECT_NE(some.find("a GPU per process (2-4 per node)"), std::string::npos) << some;
}

}  // namespace scheduler_test
}  // namespace convoy

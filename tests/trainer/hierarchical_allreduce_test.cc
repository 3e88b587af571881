// The hierarchical all-reduce (trainer/dist.cc's NodeHierarchy) with 2 nodes x 2 ranks
// simulated on this host: real processes, real Gloo, one shared-memory segment per node.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/trainer/trainer_test_util.h"
#include "trainer/dist.h"

namespace convoy::trainer {
namespace {

namespace fs = std::filesystem;
using test_util::FreePort;

constexpr int kNodes = 2;
constexpr int kLocal = 2;
constexpr int kWorld = kNodes * kLocal;

// Rank r's contribution: sizes below, at and above the segment's capacity (1 << 16 floats:
// the largest goes through in chunks), values of mixed sign and magnitude.
std::vector<torch::Tensor> Contribution(int rank) {
  torch::manual_seed(100 + rank);
  std::vector<torch::Tensor> out;
  for (int64_t n : {int64_t{17}, int64_t{1} << 16, int64_t{200003}}) {
    out.push_back(torch::randn({n}) * std::pow(10.0, rank - 1));
  }
  return out;
}

class HierarchicalAllReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy-hierarchical-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// Every rank sums the same tensors hierarchically and flat (a second job over Gloo alone),
// several all-reduces in flight at once, and reports what it got.
TEST_F(HierarchicalAllReduceTest, EqualsTheFlatGlooSumAndOnlyLeadersCrossNodes) {
  const int port = FreePort();
  const int flat_port = FreePort();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kWorld; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        torch::set_num_threads(1);
        Topology topology;
        topology.local_rank = rank % kLocal;
        topology.local_world = kLocal;
        topology.node = rank / kLocal;
        topology.nodes = kNodes;
        auto hier = Dist::Create(rank, kWorld, "127.0.0.1", port, "gloo", std::chrono::seconds(60),
                                 "auto", 1 << 16, topology);
        auto flat = Dist::Create(rank, kWorld, "127.0.0.1", flat_port, "gloo",
                                 std::chrono::seconds(60), "gloo", 1 << 16, topology);
        std::vector<torch::Tensor> h = Contribution(rank), f = Contribution(rank);
        std::vector<std::unique_ptr<Pending>> pending;
        for (auto& t : h) pending.push_back(hier->AllReduceSumAsync(t));
        for (auto& t : f) pending.push_back(flat->AllReduceSumAsync(t));
        for (auto& p : pending) p->Wait();
        torch::save(h, (dir_ / ("hier" + std::to_string(rank))).string());
        torch::save(f, (dir_ / ("flat" + std::to_string(rank))).string());
        std::ofstream out(dir_ / ("rank" + std::to_string(rank)));
        out << hier->allreduce_path() << "\n"
            << hier->cross_node_allreduces() << " " << hier->leaders_group_size() << " "
            << flat->cross_node_allreduces() << "\n";
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 1;
      }
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a rank failed";
  }

  // The tolerance: the flat and the hierarchical sums add the same four float32 values in
  // different orders; each differs from the exact sum by at most about 3 ulps of the sum of
  // magnitudes. 1e-6 of that sum (8 ulps) is a wide margin, and far below any wrong sum.
  std::vector<torch::Tensor> expected_abs(3);
  for (int r = 0; r < kWorld; ++r) {
    auto c = Contribution(r);
    for (size_t i = 0; i < c.size(); ++i) {
      expected_abs[i] = r == 0 ? c[i].abs() : expected_abs[i] + c[i].abs();
    }
  }
  std::vector<torch::Tensor> hier0, flat0;
  torch::load(hier0, (dir_ / "hier0").string());
  torch::load(flat0, (dir_ / "flat0").string());
  for (size_t i = 0; i < hier0.size(); ++i) {
    const double worst =
        ((hier0[i] - flat0[i]).abs() / (expected_abs[i] + 1e-30)).max().item<double>();
    EXPECT_LT(worst, 1e-6) << "tensor " << i;
  }
  for (int r = 0; r < kWorld; ++r) {
    // Every rank of every node holds the same sums, bit for bit.
    std::vector<torch::Tensor> h;
    torch::load(h, (dir_ / ("hier" + std::to_string(r))).string());
    for (size_t i = 0; i < h.size(); ++i) {
      EXPECT_TRUE(torch::equal(h[i], hier0[i])) << "rank " << r << " tensor " << i;
    }
    std::ifstream in(dir_ / ("rank" + std::to_string(r)));
    std::string path;
    std::getline(in, path);
    EXPECT_EQ(path, "hierarchical: shared memory within 2 nodes, gloo across");
    int64_t cross = 0, flat_cross = 0;
    int group = 0;
    in >> cross >> group >> flat_cross;
    const bool leader = r % kLocal == 0;
    // A leader all-reduced each of the three tensors across nodes, in a group of the two
    // leaders; the other ranks never left their node.
    EXPECT_EQ(cross, leader ? 3 : 0) << "rank " << r;
    EXPECT_EQ(group, leader ? kNodes : 0) << "rank " << r;
    EXPECT_EQ(flat_cross, -1) << "rank " << r;
  }
}

}  // namespace
}  // namespace convoy::trainer

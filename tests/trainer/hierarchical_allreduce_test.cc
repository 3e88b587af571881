// The hierarchical all-reduce (trainer/dist.cc's NodeHierarchy) with 2 nodes x 2 ranks
// simulated on this host: real processes, real Gloo, one shared-memory segment per node.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/trainer/trainer_test_util.h"
#include "trainer/compression.h"
#include "trainer/ddp.h"
#include "trainer/dist.h"

namespace convoy::trainer {
namespace hierarchical_allreduce_test {

namespace fs = std::filesystem;
using test_util::FreePort;
using test_util::RunRanks;

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
  const std::vector<int> codes = RunRanks(kWorld, [&](int rank) {
    Topology topology;
    topology.local_rank = rank % kLocal;
    topology.local_world = kLocal;
    topology.node = rank / kLocal;
    topology.nodes = kNodes;
    auto hier = Dist::Create(rank, kWorld, "127.0.0.1", port, "gloo", std::chrono::seconds(60),
                             "auto", 1 << 16, topology);
    auto flat = Dist::Create(rank, kWorld, "127.0.0.1", flat_port, "gloo", std::chrono::seconds(60),
                             "gloo", 1 << 16, topology);
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
    return 0;
  });
  for (int code : codes) ASSERT_EQ(code, 0) << "a rank failed";

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

// A node that cannot map its segment (far more than /dev/shm holds): every rank of every node
// falls back to the flat Gloo all-reduce, says why, and still sums.
TEST_F(HierarchicalAllReduceTest, ANodeWithoutItsSegmentMakesEveryRankFallBackToGloo) {
  const int port = FreePort();
  const std::vector<int> codes = RunRanks(kWorld, [&](int rank) {
    int code = 0;
    Topology topology;
    topology.local_rank = rank % kLocal;
    topology.local_world = kLocal;
    topology.node = rank / kLocal;
    topology.nodes = kNodes;
    auto dist = Dist::Create(rank, kWorld, "127.0.0.1", port, "gloo", std::chrono::seconds(60),
                             "auto", int64_t{1} << 40, topology);
    torch::Tensor t = torch::full({1000}, static_cast<float>(rank + 1));
    dist->AllReduceSum(t);
    const std::string path = dist->allreduce_path();
    if (!torch::equal(t, torch::full({1000}, 10.0f))) code = 10;
    if (path.rfind("gloo (hierarchical all-reduce unavailable: node 0: rank 0: ", 0) != 0 ||
        path.find("/dev/shm") == std::string::npos) {
      std::fprintf(stderr, "rank %d: path %s\n", rank, path.c_str());
      code = 11;
    }
    if (dist->hierarchical() || dist->cross_node_allreduces() != -1) code = 12;
    return code;
  });
  for (int code : codes) EXPECT_EQ(code, 0) << "exit " << code;
}

// Parameters of a small model: two buckets (b3 W3 b2 W2, past the first bucket's 1 MiB | b1
// W1), each larger than the segment (in chunks); rank r's gradient at `step` is
// Coefficients(r, step), so that the exact average is known.
std::vector<torch::Tensor> MakeParams() {
  std::vector<torch::Tensor> p{torch::zeros({512, 512}), torch::zeros({512}),
                               torch::zeros({600, 512}), torch::zeros({600}),
                               torch::zeros({10, 600}),  torch::zeros({10})};
  for (auto& t : p) t.set_requires_grad(true);
  return p;
}

std::vector<torch::Tensor> Coefficients(int rank, int step) {
  torch::manual_seed(1000 * step + rank + 1);
  std::vector<torch::Tensor> c;
  for (const auto& t : MakeParams()) c.push_back(torch::randn(t.sizes()) * (1 + rank));
  return c;
}

class HierarchicalGradSyncTest : public HierarchicalAllReduceTest,
                                 public ::testing::WithParamInterface<const char*> {};

// convoy's DDP hooks over the hierarchical all-reduce: compression (if any) on the leaders'
// hop alone. Every rank ends with the same gradients, bit for bit, within the compression's
// error of the exact average (none: float32 rounding), and only leaders cross nodes.
TEST_P(HierarchicalGradSyncTest, GradientsAreTheAverageOnEveryRank) {
  const std::string kind = GetParam();
  constexpr int kSteps = 2;
  const int port = FreePort();
  const std::vector<int> codes = RunRanks(kWorld, [&](int rank) {
    Topology topology;
    topology.local_rank = rank % kLocal;
    topology.local_world = kLocal;
    topology.node = rank / kLocal;
    topology.nodes = kNodes;
    auto dist = Dist::Create(rank, kWorld, "127.0.0.1", port, "gloo", std::chrono::seconds(60),
                             "auto", 1 << 16, topology);
    CompressionOptions compression;
    compression.kind = kind;
    // The bound below is one step's rounding: without bf16's error feedback, which would
    // carry the first step's into the last (compression_test checks that part).
    compression.bf16_error_feedback = false;
    std::vector<torch::Tensor> params = MakeParams();
    auto sync = MakeGradSync("hooks", params, *dist, 0.25, compression);
    std::vector<torch::Tensor> reduced;
    for (int step = 0; step < kSteps; ++step) {
      sync->BeforeForward(true);
      const auto c = Coefficients(rank, step);
      torch::Tensor loss = torch::zeros({});
      for (size_t i = 0; i < params.size(); ++i) loss = loss + (params[i] * c[i]).sum();
      sync->BeforeBackward();
      loss.backward();
      sync->Finish();
      reduced.clear();
      for (const auto& p : params) reduced.push_back(p.grad().detach().clone());
      ClearGrads(params);
    }
    torch::save(reduced, (dir_ / ("grads" + std::to_string(rank))).string());
    std::ofstream out(dir_ / ("rank" + std::to_string(rank)));
    out << dist->cross_node_allreduces() << " " << sync->num_buckets() << "\n";
    return 0;
  });
  for (int code : codes) ASSERT_EQ(code, 0) << "a rank failed";
  // The exact average of the last step, and the scale of its error: the sum of magnitudes.
  std::vector<torch::Tensor> exact, abs_sum;
  for (int r = 0; r < kWorld; ++r) {
    auto c = Coefficients(r, kSteps - 1);
    for (size_t i = 0; i < c.size(); ++i) {
      if (r == 0) {
        exact.push_back(c[i] / kWorld);
        abs_sum.push_back(c[i].abs() / kWorld);
      } else {
        exact[i] += c[i] / kWorld;
        abs_sum[i] += c[i].abs() / kWorld;
      }
    }
  }
  // float32: 1e-6 of the sum of magnitudes (see the test above); bf16: the leaders send the
  // node sums rounded to 8 significant bits (relative error 2^-8 each), so 2^-8 of it.
  // PowerSGD (low rank, with error feedback) has no elementwise bound: it must run, and agree
  // across ranks.
  const double tolerance = kind == "bf16" ? std::ldexp(1.0, -8) : 1e-6;
  std::vector<torch::Tensor> g0;
  torch::load(g0, (dir_ / "grads0").string());
  double worst = 0;
  for (size_t i = 0; i < g0.size(); ++i) {
    const double w = ((g0[i] - exact[i]).abs() / (abs_sum[i] + 1e-30)).max().item<double>();
    if (kind != "powersgd") {
      EXPECT_LT(w, tolerance) << "parameter " << i;
    }
    worst = std::max(worst, w);
  }
  // Compressed, the leaders' hop did round (the compressor was in the path).
  if (kind != "none") {
    EXPECT_GT(worst, 1e-6);
  }
  for (int r = 0; r < kWorld; ++r) {
    std::vector<torch::Tensor> g;
    torch::load(g, (dir_ / ("grads" + std::to_string(r))).string());
    for (size_t i = 0; i < g.size(); ++i) {
      EXPECT_TRUE(torch::equal(g[i], g0[i])) << "rank " << r << " parameter " << i;
    }
    std::ifstream in(dir_ / ("rank" + std::to_string(r)));
    int64_t cross = 0, buckets = 0;
    in >> cross >> buckets;
    EXPECT_GE(buckets, 2);
    EXPECT_EQ(cross, r % kLocal == 0 ? kSteps * buckets : 0) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Compression, HierarchicalGradSyncTest,
                         ::testing::Values("none", "bf16", "powersgd"));

}  // namespace hierarchical_allreduce_test
}  // namespace convoy::trainer

// Gradient compression (trainer/compression.h) through the hooks' bucketed all-reduce, two
// ranks forked as processes with a real Gloo process group over loopback TCP. Each rank
// computes every rank's gradient itself (the data of every rank is seeded), so it knows the
// exact average the all-reduce should give.
//
// Tolerances (elementwise, against the exact average of the ranks' gradients g_r / W):
// - bf16: |got - exact| <= 2^-8 * sum_r |g_r / W| + 1e-7 (each term rounded to bfloat16's
//   8 significant bits, relative error at most 2^-8, then added in float32);
// - fp16: |got - exact| <= 2^-10 * sum_r |g_r / W| + 1e-7 (11-bit significand; the 1e-7
//   covers float16's subnormals);
// - powersgd: 1-dimensional tensors (biases) within 1e-6 relative; before
//   powersgd_start_step every tensor within 1e-6 relative; afterwards a single step's matrices
//   are a rank-r approximation (no elementwise bound), but with error feedback the sum over
//   steps of the reduced gradients tracks the sum of the exact ones: their difference is the
//   last step's residual, so the relative error of the sum falls as steps accumulate.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/trainer/trainer_test_util.h"
#include "trainer/compression.h"
#include "trainer/ddp.h"
#include "trainer/dist.h"

namespace convoy::trainer {
namespace compression_test {

namespace fs = std::filesystem;
using test_util::FreePort;
using test_util::RunRanks;

constexpr int kWorld = 2;
constexpr int kSteps = 40;
constexpr int64_t kIn = 256, kHidden = 512, kWide = 600, kClasses = 10, kBatch = 16;

// W1 (512 x 256), b1, W2 (600 x 512), b2, W3 (10 x 600), b3: with --bucket-mb 0.25, two
// buckets (b3 W3 b2 W2 | b1 W1); W1 and W2 are worth compressing at rank 2, W3 is not.
std::vector<torch::Tensor> MakeParams() {
  torch::manual_seed(7);
  std::vector<torch::Tensor> p{
      torch::randn({kHidden, kIn}) * 0.05,    torch::randn({kHidden}) * 0.1,
      torch::randn({kWide, kHidden}) * 0.05,  torch::randn({kWide}) * 0.1,
      torch::randn({kClasses, kWide}) * 0.05, torch::randn({kClasses}) * 0.1};
  for (auto& t : p) t.set_requires_grad(true);
  return p;
}

torch::Tensor Loss(const std::vector<torch::Tensor>& p, int rank, int step) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 * step + rank + 1);
  torch::Tensor x = torch::randn({kBatch, kIn}, gen, torch::TensorOptions());
  // Labels from a fixed teacher: the gradients share a direction from step to step.
  auto tgen = at::make_generator<at::CPUGeneratorImpl>(99);
  torch::Tensor teacher = torch::randn({kIn, kClasses}, tgen, torch::TensorOptions());
  torch::Tensor y = x.matmul(teacher).argmax(1);
  torch::Tensor h = torch::tanh(torch::nn::functional::linear(x, p[0], p[1]));
  h = torch::tanh(torch::nn::functional::linear(h, p[2], p[3]));
  return torch::nn::functional::cross_entropy(torch::nn::functional::linear(h, p[4], p[5]), y);
}

// sum_r f(g_r) / W over the ranks' gradients at `step`, elementwise (parameters without hooks).
std::vector<torch::Tensor> SumOverRanks(const std::vector<torch::Tensor>& params, int step,
                                        const std::function<torch::Tensor(torch::Tensor)>& f) {
  std::vector<torch::Tensor> sum;
  for (int r = 0; r < kWorld; ++r) {
    std::vector<torch::Tensor> copy;
    for (const auto& t : params) copy.push_back(t.detach().clone().set_requires_grad(true));
    Loss(copy, r, step).backward();
    for (size_t i = 0; i < copy.size(); ++i) {
      torch::Tensor g = f(copy[i].grad()) / kWorld;
      if (sum.size() <= i) {
        sum.push_back(g);
      } else {
        sum[i] = sum[i] + g;
      }
    }
  }
  return sum;
}

// The exact average of every rank's gradient at `step`.
std::vector<torch::Tensor> ExactAverage(const std::vector<torch::Tensor>& params, int step) {
  return SumOverRanks(params, step, [](torch::Tensor g) { return g; });
}

// sum_r |g_r / W|, elementwise.
std::vector<torch::Tensor> AbsSum(const std::vector<torch::Tensor>& params, int step) {
  return SumOverRanks(params, step, [](torch::Tensor g) { return g.abs(); });
}

double Norm(const std::vector<torch::Tensor>& v) {
  double s = 0;
  for (const auto& t : v) s += t.pow(2).sum().item<double>();
  return std::sqrt(s);
}

class CompressionTest : public ::testing::Test {
 public:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy-compression-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Forks the ranks; each runs `steps` synchronising steps with `options` and reports
  // `key value` lines from `check` (called after each step with the reduced gradients) to
  // <dir>/rank<R>. Returns rank 0's report; every rank's exit code must be 0.
  std::map<std::string, double> Run(
      const CompressionOptions& options, int steps,
      const std::function<void(int step, const std::vector<torch::Tensor>& params,
                               const std::vector<torch::Tensor>& reduced,
                               std::map<std::string, double>* report)>& check) {
    const int port = FreePort();
    const std::vector<int> codes = RunRanks(kWorld, [&](int rank) {
      auto dist =
          Dist::Create(rank, kWorld, "127.0.0.1", port, "gloo", std::chrono::seconds(60), "gloo");
      std::vector<torch::Tensor> params = MakeParams();
      auto sync = MakeGradSync("hooks", params, *dist, 0.25, options);
      std::map<std::string, double> report;
      report["buckets"] = static_cast<double>(sync->num_buckets());
      for (int step = 0; step < steps; ++step) {
        sync->BeforeForward(true);
        torch::Tensor loss = Loss(params, rank, step);
        sync->BeforeBackward();
        loss.backward();
        sync->Finish();
        std::vector<torch::Tensor> reduced;
        for (const auto& p : params) reduced.push_back(p.grad().detach().clone());
        ClearGrads(params);
        check(step, params, reduced, &report);
        if (step == steps - 1) {
          torch::save(reduced, (dir_ / ("grads" + std::to_string(rank))).string());
        }
      }
      std::ofstream out(dir_ / ("rank" + std::to_string(rank)));
      for (const auto& [k, v] : report) out << k << " " << v << "\n";
      return 0;
    });
    for (int code : codes) EXPECT_EQ(code, 0) << "a rank failed";
    // Every rank ends with the same gradients, bit for bit.
    std::vector<torch::Tensor> g0, g1;
    torch::load(g0, (dir_ / "grads0").string());
    torch::load(g1, (dir_ / "grads1").string());
    EXPECT_EQ(g0.size(), g1.size());
    for (size_t i = 0; i < g0.size() && i < g1.size(); ++i) {
      EXPECT_TRUE(torch::equal(g0[i], g1[i])) << "parameter " << i << " differs between ranks";
    }
    std::map<std::string, double> report;
    std::ifstream in(dir_ / "rank0");
    std::string key;
    double value;
    while (in >> key >> value) report[key] = value;
    return report;
  }

  // Half-precision paths: the worst ratio |got - exact| / bound over 3 steps (bf16: its
  // first step only, before error feedback carries anything), and the largest difference (0
  // would mean nothing was compressed).
  void CheckHalf(const std::string& kind, double rel) {
    CompressionOptions o;
    o.kind = kind;
    const int checked_steps = kind == "bf16" ? 1 : 3;
    auto report =
        Run(o, 3,
            [rel, checked_steps](int step, const std::vector<torch::Tensor>& params,
                                 const std::vector<torch::Tensor>& reduced,
                                 std::map<std::string, double>* rep) {
              if (step >= checked_steps) return;
              const auto exact = ExactAverage(params, step);
              const auto abs_sum = AbsSum(params, step);
              for (size_t i = 0; i < exact.size(); ++i) {
                torch::Tensor err = (reduced[i] - exact[i]).abs();
                const double ratio = (err / (abs_sum[i] * rel + 1e-7)).max().item<double>();
                (*rep)["worst_ratio"] = std::max((*rep)["worst_ratio"], ratio);
                (*rep)["max_diff"] = std::max((*rep)["max_diff"], err.max().item<double>());
              }
            });
    EXPECT_EQ(report["buckets"], 2);
    EXPECT_LE(report["worst_ratio"], 1.0) << kind << " is outside its tolerance";
    EXPECT_GT(report["max_diff"], 0) << kind << ": identical to float32, nothing was compressed";
  }

  fs::path dir_;
};

TEST_F(CompressionTest, Bf16WithinTolerance) { CheckHalf("bf16", std::ldexp(1.0, -8)); }

TEST_F(CompressionTest, Fp16WithinTolerance) { CheckHalf("fp16", std::ldexp(1.0, -10)); }

// bf16 over 10 steps: the worst ratio, elementwise, of |sum of the reduced gradients - sum
// of the exact averages| to 2^-7 * sum_r |g_r / W| at the last step, plus 1e-6 for float32's
// own additions. With error feedback the difference of the sums is only what rounding left
// out of the last step (each rank's residual: at most 2^-8 of what it sent, which is its
// gradient plus the step before's residual); without, every step's rounding stays in it.
double Bf16SumRatio(CompressionTest& t, bool error_feedback) {
  CompressionOptions o;
  o.kind = "bf16";
  o.bf16_error_feedback = error_feedback;
  auto report =
      t.Run(o, 10,
            [](int step, const std::vector<torch::Tensor>& params,
               const std::vector<torch::Tensor>& reduced, std::map<std::string, double>* rep) {
              static std::vector<torch::Tensor> sum_got, sum_exact;
              const auto exact = ExactAverage(params, step);
              // Summed in float64: float32's own rounding over ten additions would blur it.
              for (size_t i = 0; i < exact.size(); ++i) {
                if (sum_got.size() <= i) {
                  sum_got.push_back(torch::zeros_like(reduced[i], torch::kFloat64));
                  sum_exact.push_back(torch::zeros_like(exact[i], torch::kFloat64));
                }
                sum_got[i] += reduced[i].to(torch::kFloat64);
                sum_exact[i] += exact[i].to(torch::kFloat64);
              }
              if (step != 9) return;
              const auto abs_sum = AbsSum(params, step);
              for (size_t i = 0; i < exact.size(); ++i) {
                torch::Tensor err = (sum_got[i] - sum_exact[i]).abs();
                const double ratio =
                    (err / (abs_sum[i] * std::ldexp(1.0, -7) + 1e-6)).max().item<double>();
                (*rep)["sum_ratio"] = std::max((*rep)["sum_ratio"], ratio);
              }
            });
  return report["sum_ratio"];
}

TEST_F(CompressionTest, Bf16ErrorFeedbackKeepsTheSumWithinOneStepsRounding) {
  const double with = Bf16SumRatio(*this, true);
  const double without = Bf16SumRatio(*this, false);
  std::printf(
      "bf16 over 10 steps, worst |sum error| / bound: %.3f with error feedback, %.3f "
      "without\n",
      with, without);
  EXPECT_LE(with, 1.0);
  EXPECT_GT(without, 1.0) << "the bound does not tell the two apart";
}

// PowerSGD over kSteps steps (the first uncompressed): the report's relative errors.
std::map<std::string, double> PowerSgdRun(CompressionTest& t, bool error_feedback) {
  CompressionOptions o;
  o.kind = "powersgd";
  o.powersgd_rank = 2;
  o.powersgd_start_step = 1;
  o.seed = 5;
  o.powersgd_error_feedback = error_feedback;
  return t.Run(o, kSteps,
               [](int step, const std::vector<torch::Tensor>& params,
                  const std::vector<torch::Tensor>& reduced, std::map<std::string, double>* rep) {
                 static std::vector<torch::Tensor> sum_got, sum_exact;
                 const auto exact = ExactAverage(params, step);
                 auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
                   return (a - b).norm().item<double>() / b.norm().item<double>();
                 };
                 if (step == 0) {
                   // Before powersgd_start_step: uncompressed.
                   double worst = 0;
                   for (size_t i = 0; i < exact.size(); ++i)
                     worst = std::max(worst, rel(reduced[i], exact[i]));
                   (*rep)["uncompressed_step"] = worst;
                   return;
                 }
                 // Biases travel uncompressed; W1, W2 and W3 as P and Q.
                 double plain = 0;
                 for (size_t i : {size_t{1}, size_t{3}, size_t{5}}) {
                   plain = std::max(plain, rel(reduced[i], exact[i]));
                 }
                 (*rep)["biases"] = std::max((*rep)["biases"], plain);
                 if (sum_got.empty()) {
                   sum_got = reduced;
                   sum_exact = exact;
                   (*rep)["first_step"] =
                       std::max({rel(reduced[0], exact[0]), rel(reduced[2], exact[2]),
                                 rel(reduced[4], exact[4])});
                 } else {
                   for (size_t i = 0; i < exact.size(); ++i) {
                     sum_got[i] = sum_got[i] + reduced[i];
                     sum_exact[i] = sum_exact[i] + exact[i];
                   }
                 }
                 if (step == 5 || step == kSteps - 1) {
                   std::vector<torch::Tensor> d;
                   for (size_t i = 0; i < exact.size(); ++i) d.push_back(sum_got[i] - sum_exact[i]);
                   (*rep)[step == 5 ? "sum_5" : "sum_last"] = Norm(d) / Norm(sum_exact);
                 }
               });
}

TEST_F(CompressionTest, PowerSgdErrorFeedbackMakesTheSumConverge) {
  auto ef = PowerSgdRun(*this, true);
  auto plain = PowerSgdRun(*this, false);
  std::printf(
      "powersgd rank 2, relative errors: uncompressed step %.2g, biases %.2g, first compressed "
      "step %.3f; sum over 5 steps %.3f, over %d steps %.3f (without error feedback: %.3f, "
      "%.3f)\n",
      ef["uncompressed_step"], ef["biases"], ef["first_step"], ef["sum_5"], kSteps - 1,
      ef["sum_last"], plain["sum_5"], plain["sum_last"]);
  EXPECT_EQ(ef["buckets"], 2);
  EXPECT_LT(ef["uncompressed_step"], 1e-6);
  EXPECT_LT(ef["biases"], 1e-6);
  // A single compressed step is visibly lossy (rank 2 of 512 x 256, 600 x 512, 10 x 600) ...
  EXPECT_GT(ef["first_step"], 0.3);
  // ... but with error feedback the sum of the reduced gradients converges to the exact sum:
  // their difference is one step's residual, so the relative error keeps falling ...
  EXPECT_LT(ef["sum_last"], 0.5 * ef["sum_5"]);
  EXPECT_LT(ef["sum_last"], 0.4 * ef["first_step"]);
  // ... and it is far below what the same compression leaves without error feedback.
  EXPECT_LT(ef["sum_last"], 0.6 * plain["sum_last"]);
}

// A bucket under kPowerSgdMinBucketElements is all-reduced as it is, at every step: its
// compression would cost two more round trips than it saves; one at the threshold is
// compressed. Each rank reduces a square matrix (rank r's is r + 1 times a shared random one,
// so the sum is 3 times it); reports the relative error against that sum.
TEST_F(CompressionTest, PowerSgdLeavesASmallBucketUncompressed) {
  const int port = FreePort();
  const int64_t small_side = 150;  // 22,500 elements
  const int64_t large_side = 182;  // 33,124
  ASSERT_LT(small_side * small_side, kPowerSgdMinBucketElements);
  ASSERT_GE(large_side * large_side, kPowerSgdMinBucketElements);
  const std::vector<int> codes = RunRanks(kWorld, [&](int rank) {
    auto dist =
        Dist::Create(rank, kWorld, "127.0.0.1", port, "gloo", std::chrono::seconds(60), "gloo");
    CompressionOptions o;
    o.kind = "powersgd";
    o.powersgd_start_step = 0;
    auto compressor = MakeCompressor(o, *dist);
    std::ofstream out(dir_ / ("rank" + std::to_string(rank)));
    for (int64_t side : {small_side, large_side}) {
      torch::manual_seed(11);
      torch::Tensor shared = torch::randn({side * side});
      torch::Tensor flat = shared * (rank + 1);
      BucketLayout layout;
      layout.shapes = {{side, side}};
      layout.offsets = {0};
      layout.numel = side * side;
      compressor->Reduce(side == small_side ? 0 : 1, flat, layout);
      const torch::Tensor exact = shared * 3;
      out << side << " " << ((flat - exact).norm() / exact.norm()).item<double>() << "\n";
    }
    compressor->EndStep();
    return 0;
  });
  for (int code : codes) EXPECT_EQ(code, 0) << "a rank failed";
  std::map<int64_t, double> error;
  std::ifstream in(dir_ / "rank0");
  int64_t side;
  double rel;
  while (in >> side >> rel) error[side] = rel;
  ASSERT_EQ(error.size(), 2u);
  EXPECT_LT(error[small_side], 1e-6) << "the small bucket was compressed";
  // A random 182 x 182 matrix is far from rank 2: compressed, most of it is left out.
  EXPECT_GT(error[large_side], 0.5) << "the bucket at the threshold was not compressed";
}

TEST(OrthogonalizeTest, ColumnsBecomeOrthonormal) {
  torch::manual_seed(3);
  torch::Tensor m = torch::randn({50, 4});
  OrthogonalizeColumns(m);
  torch::Tensor gram = m.t().matmul(m);
  EXPECT_LT((gram - torch::eye(4)).abs().max().item<double>(), 1e-5);
}

}  // namespace compression_test
}  // namespace convoy::trainer

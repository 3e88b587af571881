// OptimizerStep (trainer/train_helpers.h): the foreach SGD step is torch::optim::SGD::step(),
// bit for bit, including its state (what snapshots and checkpoints save), across learning-rate
// changes and parameters without a gradient; options it does not fuse take the optimiser's own
// step.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/train_helpers.h"

namespace convoy::trainer {
namespace optimizer_step_test {

std::vector<torch::Tensor> Params(uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> p{torch::randn({32, 16}), torch::randn({16}), torch::randn({7}),
                               torch::randn({3, 3})};
  for (auto& t : p) t.set_requires_grad(true);
  return p;
}

// Gives every parameter but (on odd steps) the third a gradient, as backward would.
void SetGrads(std::vector<torch::Tensor>& params, int step) {
  torch::manual_seed(1000 + step);
  for (size_t i = 0; i < params.size(); ++i) {
    if (i == 2 && step % 2 == 1) {
      params[i].mutable_grad() = torch::Tensor();
      continue;
    }
    params[i].mutable_grad() = torch::randn(params[i].sizes());
  }
}

void ExpectSameRun(const torch::optim::SGDOptions& options) {
  auto a = Params(7);
  auto b = Params(7);
  torch::optim::SGD reference(a, options);
  torch::optim::SGD fused(b, options);
  for (int step = 0; step < 6; ++step) {
    if (step == 3) {
      SetLr(reference, 0.05);
      SetLr(fused, 0.05);
    }
    SetGrads(a, step);
    SetGrads(b, step);
    reference.step();
    OptimizerStep(fused);
  }
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
    if (options.momentum() == 0) continue;  // no state to compare
    const auto& sa = static_cast<torch::optim::SGDParamState&>(
        *reference.state().at(StateKey(reference.state(), a[i])));
    const auto& sb =
        static_cast<torch::optim::SGDParamState&>(*fused.state().at(StateKey(fused.state(), b[i])));
    EXPECT_TRUE(torch::equal(sa.momentum_buffer(), sb.momentum_buffer())) << "buffer " << i;
  }
}

TEST(OptimizerStepTest, FusedSgdIsTheOptimisersOwnStepBitForBit) {
  ExpectSameRun(torch::optim::SGDOptions(0.01).momentum(0.9));
}

TEST(OptimizerStepTest, OptionsItDoesNotFuseTakeTheOptimisersOwnStep) {
  ExpectSameRun(torch::optim::SGDOptions(0.01).momentum(0.9).weight_decay(1e-4));
  ExpectSameRun(torch::optim::SGDOptions(0.01).momentum(0.9).nesterov(true));
  ExpectSameRun(torch::optim::SGDOptions(0.01));
}

TEST(OptimizerStepTest, FusedSgdMovesTheParameters) {
  // Not a no-op: after the first (the optimiser's own) step, the fused one changes them.
  auto p = Params(3);
  torch::optim::SGD sgd(p, torch::optim::SGDOptions(0.1).momentum(0.9));
  SetGrads(p, 0);
  OptimizerStep(sgd);
  const torch::Tensor before = p[0].detach().clone();
  SetGrads(p, 2);
  OptimizerStep(sgd);
  EXPECT_FALSE(torch::equal(before, p[0]));
}

}  // namespace optimizer_step_test
}  // namespace convoy::trainer

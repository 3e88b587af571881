// The model registry: "fmnist-cnn" (the reference book's CNN, 1,630,090 parameters),
// "mlp" and "resnet" (a small residual network with batch norm).
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

namespace convoy::trainer {

// A model maps [N, 1, 28, 28] images to [N, 10] logits.
class Model : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// nullptr for an unknown name.
std::shared_ptr<Model> MakeModel(const std::string& name);
std::vector<std::string> ModelNames();
int64_t CountParameters(torch::nn::Module& m);

// The warm trainer's warm-up of the default model's kernels, before it forks any rank: oneDNN
// makes its convolution primitives on their first use (a tenth of a second here) and caches
// them by shape and thread count, so a rank forked afterwards with one intra-op thread and
// the default batch finds them made. It runs on one thread (no OpenMP team is made, so the
// fork stays safe) and, on a CUDA LibTorch, not at all (nothing may touch CUDA before the
// fork).
void WarmUpKernels();

}  // namespace convoy::trainer

#include "trainer/models.h"

#include <torch/nn.h>
#include <torch/torch.h>

namespace convoy::trainer {
namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

// Conv 1->32, Conv 32->64 (3x3, pad 1, ReLU, MaxPool 2 each); Linear 3136->512; 512->10.
class FmnistCnn : public Model {
 public:
  FmnistCnn() {
    conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)));
    conv2_ = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)));
    fc1_ = register_module("fc1", nn::Linear(3136, 512));
    fc2_ = register_module("fc2", nn::Linear(512, 10));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = F::max_pool2d(torch::relu(conv1_(x)), F::MaxPool2dFuncOptions(2));
    x = F::max_pool2d(torch::relu(conv2_(x)), F::MaxPool2dFuncOptions(2));
    x = torch::relu(fc1_(x.flatten(1)));
    return fc2_(x);
  }

 private:
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

class Mlp : public Model {
 public:
  Mlp() {
    fc1_ = register_module("fc1", nn::Linear(784, 256));
    fc2_ = register_module("fc2", nn::Linear(256, 128));
    fc3_ = register_module("fc3", nn::Linear(128, 10));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(fc1_(x.flatten(1)));
    x = torch::relu(fc2_(x));
    return fc3_(x);
  }

 private:
  nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};

class Block : public torch::nn::Module {
 public:
  Block(int in, int out, int stride) {
    c1_ = register_module(
        "c1", nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    b1_ = register_module("b1", nn::BatchNorm2d(out));
    c2_ = register_module("c2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    b2_ = register_module("b2", nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      down_ = register_module("down",
                              nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      downbn_ = register_module("downbn", nn::BatchNorm2d(out));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = torch::relu(b1_(c1_(x)));
    y = b2_(c2_(y));
    torch::Tensor skip = down_ ? downbn_(down_(x)) : x;
    return torch::relu(y + skip);
  }

 private:
  nn::Conv2d c1_{nullptr}, c2_{nullptr}, down_{nullptr};
  nn::BatchNorm2d b1_{nullptr}, b2_{nullptr}, downbn_{nullptr};
};

// A small ResNet: stem 1->16, blocks 16, 32 (stride 2), 64 (stride 2), pool, linear.
class ResNet : public Model {
 public:
  ResNet() {
    stem_ = register_module("stem", nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1).bias(false)));
    bn_ = register_module("bn", nn::BatchNorm2d(16));
    b1_ = register_module("block1", std::make_shared<Block>(16, 16, 1));
    b2_ = register_module("block2", std::make_shared<Block>(16, 32, 2));
    b3_ = register_module("block3", std::make_shared<Block>(32, 64, 2));
    fc_ = register_module("fc", nn::Linear(64, 10));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(bn_(stem_(x)));
    x = b3_->forward(b2_->forward(b1_->forward(x)));
    x = F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions(1)).flatten(1);
    return fc_(x);
  }

 private:
  nn::Conv2d stem_{nullptr};
  nn::BatchNorm2d bn_{nullptr};
  std::shared_ptr<Block> b1_, b2_, b3_;
  nn::Linear fc_{nullptr};
};

}  // namespace

std::shared_ptr<Model> MakeModel(const std::string& name) {
  if (name == "fmnist-cnn") return std::make_shared<FmnistCnn>();
  if (name == "mlp") return std::make_shared<Mlp>();
  if (name == "resnet") return std::make_shared<ResNet>();
  return nullptr;
}

std::vector<std::string> ModelNames() { return {"fmnist-cnn", "mlp", "resnet"}; }

int64_t CountParameters(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

void WarmUpKernels() {
#ifndef CONVOY_CUDA_LIBTORCH
  torch::set_num_threads(1);
  auto model = MakeModel("fmnist-cnn");
  model->eval();
  torch::Tensor x = torch::zeros({32, 1, 28, 28});
  torch::Tensor y = torch::zeros({32}, torch::kInt64);
  torch::nn::functional::cross_entropy(model->forward(x), y).backward();
#endif
}

}  // namespace convoy::trainer

// Debian's libtorch-dev 1.13 ships c10d/reducer.hpp but not this header, which reducer.hpp
// includes for two names only. This stand-in declares them as LibTorch defines them
// (torch/csrc/distributed/autograd/context/context.h), so the Reducer's layout is the
// library's (sizeof(c10d::Reducer) is 912 bytes either way). It is on the include path only
// when the LibTorch in use lacks the real header (trainer/CMakeLists.txt).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch {
namespace distributed {
namespace autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};

using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch

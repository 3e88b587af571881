#include "trainer/device_check.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <vector>

namespace convoy::trainer {
namespace {

// "0,2" -> {0, 2}; false for anything else (empty, a negative or non-numeric entry).
bool ParseIndices(const std::string& text, std::vector<int>* out) {
  if (text.empty() || text.back() == ',') return false;  // getline drops a trailing empty item
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty() || item.size() > 4 ||
        item.find_first_not_of("0123456789") != std::string::npos)
      return false;
    out->push_back(std::stoi(item));
  }
  return !out->empty();
}

}  // namespace

int CheckDevices(const std::string& indices) {
  std::vector<int> want;
  if (!ParseIndices(indices, &want)) {
    std::cerr << "convoy-trainer: --check-devices: '" << indices
              << "' is not a comma-separated list of GPU indices" << std::endl;
    return 2;
  }
#ifndef CONVOY_CUDA_LIBTORCH
  std::cout << "LibTorch without CUDA: no kernel run on GPU(s) " << indices << std::endl;
  return 0;
#else
  const int visible =
      torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  // The same product on the CPU: small integers, exact in float32 whichever way it is summed.
  const torch::Tensor a = torch::arange(1, 257, torch::kFloat32).reshape({16, 16}) / 16;
  const torch::Tensor expect = torch::matmul(a, a.t());
  int failed = 0;
  for (int index : want) {
    if (index >= visible) {
      std::cout << "gpu " << index << ": not visible to CUDA (it sees " << visible << ")"
                << std::endl;
      ++failed;
      continue;
    }
    try {
      const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
      const auto t0 = std::chrono::steady_clock::now();
      const torch::Tensor on = a.to(device);
      const torch::Tensor got = torch::matmul(on, on.t()).to(torch::kCPU);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const double error = (got - expect).abs().max().item<double>();
      char line[160];
      if (!std::isfinite(error) || error > 1e-2) {
        std::snprintf(line, sizeof(line),
                      "gpu %d: a 16x16 matmul gave a wrong result (max error %.3g)", index, error);
        ++failed;
      } else {
        std::snprintf(line, sizeof(line), "gpu %d: ok (%.1f ms)", index, ms);
      }
      std::cout << line << std::endl;
    } catch (const std::exception& e) {
      std::string what = e.what();
      std::cout << "gpu " << index << ": " << what.substr(0, what.find('\n')) << std::endl;
      ++failed;
    }
  }
  return failed > 0 ? 1 : 0;
#endif
}

}  // namespace convoy::trainer

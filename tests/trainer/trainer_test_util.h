// Helpers shared by the trainer tests that run real convoy-trainer processes.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace convoy::trainer::test_util {

// A loopback port that was free a moment ago (for MASTER_PORT).
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The parameters a trainer saved with --save-params.
inline std::vector<torch::Tensor> LoadParams(const std::string& path) {
  std::vector<torch::Tensor> params;
  torch::load(params, path);
  return params;
}

// Largest |a - b| over the whole model, relative to the largest |b| (the parameters'
// scale): 0 when bit-identical, 1e-5 means agreement to about five significant digits.
inline double MaxRelativeDifference(const std::vector<torch::Tensor>& a,
                                    const std::vector<torch::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 1e-12;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    scale = std::max(scale, b[i].abs().max().item<double>());
    diff = std::max(diff, (a[i] - b[i]).abs().max().item<double>());
  }
  return diff / scale;
}

}  // namespace convoy::trainer::test_util

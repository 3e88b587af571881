// Helpers shared by the trainer tests that run real convoy-trainer processes.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
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

// Forks `world` processes, rank 0 to world - 1, each running `rank_main(rank)` (one thread of
// intra-op parallelism) and exiting with what it returns; an exception is printed with its
// rank and exits 1. Waits for all of them and returns their exit codes, in rank order (-1 for
// one that did not exit normally).
inline std::vector<int> RunRanks(int world, const std::function<int(int rank)>& rank_main) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        torch::set_num_threads(1);
        code = rank_main(rank);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 1;
      }
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return codes;
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

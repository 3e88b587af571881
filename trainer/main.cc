// convoy-trainer: DDP training of the registered models on Fashion-MNIST, started by a
// convoy-worker (or torchrun, or by hand) with the torchrun environment.
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

// The top-level CMakeLists passes "0.1.0 (git 1a2b3c4)"; a standalone trainer build has none.
#ifndef CONVOY_VERSION_STRING
#define CONVOY_VERSION_STRING "unknown"
#endif

#include "rank_process/zygote_protocol.h"
#include "trainer/checkpoint.h"
#include "trainer/device_check.h"
#include "trainer/models.h"
#include "trainer/options.h"
#include "trainer/train.h"

namespace {

// One rank: in this process, or in a child forked by the warm trainer.
int RankMain(int argc, char** argv) {
  convoy::trainer::Options options;
  const std::string err = convoy::trainer::ParseOptions(argc, argv, &options);
  if (!err.empty()) {
    std::cerr << "convoy-trainer: " << err << std::endl;
    return 2;
  }
  try {
    if (options.fill_data_cache) return convoy::trainer::FillDataCache(options);
    return convoy::trainer::Run(options);
  } catch (const std::exception& e) {
    std::cerr << "convoy-trainer: error: " << e.what() << std::endl;
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Every step frees and reallocates megabytes of gradients and activations. With glibc's
  // adaptive thresholds, some runs ended up returning them to the kernel each step and
  // faulting them back in: 5x slower (730 against 3,900 samples/s, one process, 2 threads);
  // setting the trim threshold alone fixes the mmap threshold at 128 KiB: 10x slower.
  // Keep freed memory in the heap instead.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::cout << "convoy-trainer " CONVOY_VERSION_STRING << std::endl;
    return 0;
  }
  // A worker's health check: a tiny kernel on each of its GPUs (trainer/device_check.h).
  if (argc == 3 && std::strcmp(argv[1], "--check-devices") == 0) {
    return convoy::trainer::CheckDevices(argv[2]);
  }
  // The warm trainer (rank_process/zygote_protocol.h), started by a worker: LibTorch is loaded
  // and registered by now; it forks ranks that run RankMain and starts nothing itself. Its
  // ranks inherit a built state reader (a restart loads a state before its first step).
  if (argc == 4 && std::strcmp(argv[1], "--zygote") == 0) {
    convoy::trainer::WarmUpStateLoading();
    convoy::trainer::WarmUpKernels();
    return convoy::zygote::Serve(std::atoi(argv[2]), &RankMain);
  }
  return RankMain(argc, argv);
}

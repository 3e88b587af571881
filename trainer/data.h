// Fashion-MNIST: the IDX reader (validating), the epoch's shuffled order and a background
// prefetcher.
#pragma once

#include <torch/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace convoy::trainer {

struct Dataset {
  torch::Tensor images;     // [N, 1, 28, 28] uint8, as in the file (a quarter of float's memory)
  torch::Tensor labels;     // [N] int64 in [0, 9]
  std::string source_note;  // where the bytes came from, for the log (data_cache.h)
  int64_t size() const { return labels.size(0); }
  // Images idx[0..n) as normalised float32 ([0, 1] scaled by Fashion-MNIST's mean and std).
  // A plain loop over a lookup table: no ATen parallel region, so a background thread that
  // assembles batches never starts an OpenMP team of its own to compete with training.
  torch::Tensor Batch(const int64_t* idx, int64_t n) const;
  torch::Tensor Labels(const int64_t* idx, int64_t n) const;
};

// Reads `<dir>/<prefix>-images-idx3-ubyte.gz` and `<dir>/<prefix>-labels-idx1-ubyte.gz`
// (prefix "train" or "t10k"). Throws std::runtime_error naming the file on: a missing or
// truncated file, a wrong magic number, dimensions other than 28x28, label values outside
// 0..9, or image and label counts that differ. `limit` > 0 keeps the first `limit` samples.
// Non-empty `cache_dir`: the decompressed files come from the per-host cache there
// (trainer/data_cache.h), and `images` is a read-only view of its mapping: never write to it.
// `while_waiting`: called about once a second while the worker's fill of the cache is awaited.
Dataset LoadFashionMnist(const std::string& dir, const std::string& prefix, int64_t limit = 0,
                         const std::string& cache_dir = "",
                         const std::function<void()>& while_waiting = nullptr);

// The order in which `epoch` visits an n-sample data set: torch.randperm(n) with a generator
// seeded by seed + epoch (what DistributedSampler(shuffle=True, seed) draws). Which rank takes
// which of its entries is trainer/sampler.h's.
std::vector<int64_t> EpochPermutation(int64_t n, int64_t seed, int64_t epoch);

// Assembles `batches` (lists of sample indices, in order) on a background thread, a few
// batches ahead of the consumer.
class Prefetcher {
 public:
  Prefetcher(const Dataset& data, std::vector<std::vector<int64_t>> batches);
  ~Prefetcher();
  // The next batch; undefined tensors for an empty one. False after the last.
  bool Next(torch::Tensor* x, torch::Tensor* y);
  size_t batches() const { return batches_.size(); }

 private:
  void Run();

  const Dataset& data_;
  const std::vector<std::vector<int64_t>> batches_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<torch::Tensor, torch::Tensor>> queue_;  // guarded by mu_
  bool done_ = false;                                          // guarded by mu_
  bool stop_ = false;                                          // guarded by mu_
  std::thread thread_;
};

}  // namespace convoy::trainer

// Fashion-MNIST: the IDX reader (validating), rank sharding like PyTorch's
// DistributedSampler, and a background prefetcher.
#pragma once

#include <torch/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
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
Dataset LoadFashionMnist(const std::string& dir, const std::string& prefix, int64_t limit = 0,
                         const std::string& cache_dir = "");

// The indices rank `rank` of `world` visits in `epoch`, as DistributedSampler(shuffle=True,
// seed, drop_last=False): a permutation seeded by seed + epoch, padded by wrapping so that
// every rank gets ceil(n / world) indices, rank r taking positions r, r + world, ...
std::vector<int64_t> ShardIndices(int64_t n, int rank, int world, int64_t seed, int epoch);

// Assembles batches of `indices` (in order, each of exactly `batch` samples; a partial last
// batch is dropped so that every rank runs the same number of steps) on a background thread,
// a few batches ahead of the consumer.
class Prefetcher {
 public:
  Prefetcher(const Dataset& data, std::vector<int64_t> indices, int batch, size_t first_batch);
  ~Prefetcher();
  // The next batch; false at the end.
  bool Next(torch::Tensor* x, torch::Tensor* y);
  size_t batches() const { return batches_; }

 private:
  void Run();

  const Dataset& data_;
  const std::vector<int64_t> indices_;
  const int batch_;
  const size_t batches_;
  size_t next_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<torch::Tensor, torch::Tensor>> queue_;  // guarded by mu_
  bool done_ = false;                                          // guarded by mu_
  bool stop_ = false;                                          // guarded by mu_
  std::thread thread_;
};

}  // namespace convoy::trainer

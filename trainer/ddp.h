// DistributedDataParallel's gradient synchronisation: parameters are grouped into buckets
// (in reverse registration order, roughly the order backward produces their gradients; the
// first bucket capped at 1 MiB, the rest at --bucket-mb, as PyTorch's DDP), and each
// bucket's all-reduce starts as soon as backward has produced all of its gradients, so
// communication overlaps the rest of backward. Buckets are launched in index order on every
// rank, so that the collectives match.
//
// Threading: hooks run on the thread that calls backward (the CPU autograd engine's caller).
#pragma once

#include <torch/types.h>

#include <memory>
#include <vector>

#include "trainer/dist.h"

namespace convoy::trainer {

class GradSync {
 public:
  GradSync(std::vector<torch::Tensor> params, Dist& dist, double bucket_mb);

  // Broadcasts parameters and `buffers` from rank 0 (call once before training).
  void BroadcastFromRankZero(std::vector<torch::Tensor> buffers);

  // Before each backward: whether this micro-batch's backward synchronises (the last one of
  // an accumulation), as no_sync() does for the others.
  void Prepare(bool sync);
  // After backward: waits for the all-reduces and leaves the averaged gradients in .grad().
  void Finish();

  size_t num_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<int64_t> offsets;
    torch::Tensor flat;
    size_t ready = 0;
    std::unique_ptr<Pending> pending;
    bool launched = false;
  };
  void OnGrad(size_t param, const torch::Tensor& grad);
  void LaunchReady();

  std::vector<torch::Tensor> params_;
  Dist& dist_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;  // param -> (bucket, slot)
  bool sync_ = false;
  size_t next_launch_ = 0;
};

}  // namespace convoy::trainer

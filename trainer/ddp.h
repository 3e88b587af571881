// DistributedDataParallel's gradient synchronisation, two ways behind one interface:
//
// "hooks" (HookGradSync, ddp.cc): parameters are grouped into buckets (in reverse
// registration order, roughly the order backward produces their gradients; the first bucket
// capped at 1 MiB, the rest at --bucket-mb, as PyTorch's DDP), and each bucket's all-reduce
// starts as soon as backward has produced all of its gradients, so communication overlaps
// the rest of backward. Buckets are launched in index order on every rank, so that the
// collectives match. Hooks run on the thread that calls backward.
//
// "reducer" (dist.cc): c10d::Reducer, the C++ engine under PyTorch's Python DDP, driven in
// the order Python's DistributedDataParallel drives it; with shared memory it all-reduces
// through a C++ communication hook.
//
// Both leave the averaged gradients in .grad(), to be cleared with ClearGrads (set to none:
// the next backward then moves its gradients in instead of adding them to zeros). The hooks
// also carry a few control floats in their last bucket (the trainer's stop agreement and its
// bad-step check).
#pragma once

#include <torch/types.h>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "trainer/compression.h"
#include "trainer/dist.h"

namespace convoy::trainer {

class GradSync {
 public:
  virtual ~GradSync() = default;
  // Before each micro-batch's forward: whether its backward synchronises (the last one of
  // an accumulation), as no_sync() does for the others.
  virtual void BeforeForward(bool sync) = 0;
  // Between forward and backward.
  virtual void BeforeBackward() = 0;
  // After the synchronising backward: the averaged gradients are in .grad() on return.
  virtual void Finish() = 0;
  virtual size_t num_buckets() const = 0;

  // Control values that ride along with the synchronising backward's all-reduce, summed
  // across ranks (the trainer's stop agreement and bad-step check, at no extra collective):
  // set them after that micro-batch's forward and before its backward, read the sums after
  // Finish. `values`: kControlFloats float32 on any device (on a GPU, copied without waiting
  // for them to be computed). CarriesControl() false: this implementation cannot (the caller
  // all-reduces them itself).
  static constexpr int kControlFloats = 3;
  virtual bool CarriesControl() const { return false; }
  virtual void SetControl(const torch::Tensor& values) {}
  virtual std::array<float, kControlFloats> Control() const { return {}; }

  // The step just synchronised is not applied (a bad step): forget what it carried over into
  // the next one (the error feedback and warm start of a compression), as if it had not been.
  virtual void DiscardStep() {}

  // How much of the gradients' communication backward hid, over the synchronising steps so
  // far: `window_s`, from each step's first bucket launch to its last bucket's completion,
  // and `exposed_s`, the part of it the training thread waited for in Finish. False when
  // this implementation does not measure it.
  virtual bool Overlap(double* window_s, double* exposed_s) const { return false; }
};

// `kind`: "hooks" or "reducer". Collective when world > 1 (every rank calls it).
// `compression` (kind resolved: not "auto") applies to the hooks only; with it, buckets go
// through the backend even where shared memory is available; with a hierarchical all-reduce
// (Dist::hierarchical) they are summed within each node uncompressed and compressed only
// between the nodes' leaders.
std::unique_ptr<GradSync> MakeGradSync(const std::string& kind, std::vector<torch::Tensor> params,
                                       Dist& dist, double bucket_mb,
                                       const CompressionOptions& compression = {});

// Broadcasts parameters and buffers from rank 0 (once, before training).
void BroadcastFromRankZero(Dist& dist, std::vector<torch::Tensor> params,
                           std::vector<torch::Tensor> buffers);

// Sets every parameter's gradient to none (zero_grad(set_to_none=True)).
void ClearGrads(const std::vector<torch::Tensor>& params);

class HookGradSync : public GradSync {
 public:
  HookGradSync(std::vector<torch::Tensor> params, Dist& dist, double bucket_mb,
               const CompressionOptions& compression = {});
  ~HookGradSync() override;
  void BeforeForward(bool sync) override;
  void BeforeBackward() override {}
  void Finish() override;
  size_t num_buckets() const override { return buckets_.size(); }
  // The control values are the last kControlFloats of the last bucket (launched last);
  // not with compression (they must stay exact: the caller all-reduces them).
  bool CarriesControl() const override { return !compressed_; }
  void SetControl(const torch::Tensor& values) override;
  std::array<float, kControlFloats> Control() const override;
  void DiscardStep() override;
  bool Overlap(double* window_s, double* exposed_s) const override;

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<int64_t> offsets;
    torch::Tensor flat;    // what this rank contributes
    torch::Tensor result;  // the average (flat itself, unless in shared memory)
    int64_t arena_offset = 0;
    size_t ready = 0;
    std::unique_ptr<Pending> pending;
    BucketLayout layout;  // for compression
    // When a compressed reduction finished (its task's end; written before the future is
    // made ready, read after waiting on it).
    std::chrono::steady_clock::time_point done;
  };
  void OnGrad(size_t param, const torch::Tensor& grad);
  void LaunchReady();

  std::vector<torch::Tensor> params_;
  Dist& dist_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;  // param -> (bucket, slot)
  const torch::Tensor inv_;                       // 1 / world, a scalar
  bool sync_ = false;
  size_t next_launch_ = 0;
  int64_t control_offset_ = 0;                   // in the last bucket
  std::array<float, kControlFloats> control_{};  // the sums, read in Finish
  torch::Tensor local_control_;                  // a world of one: what it sums to
  // With an all-reduce over shared memory, buckets live in the segment: this rank's slot
  // holds `flat`, the segment's result area `result`, which the gradients then view.
  ShmAllReduce* arena_ = nullptr;
  // With compression, every bucket's reduction runs on executor_'s thread, in launch order.
  // With a hierarchical all-reduce, only on the cross-node hop: the compressor (over the
  // leaders' group) runs on the leaders, on the all-reduce's thread, and executor_ is null.
  bool compressed_ = false;  // the same on every rank
  std::unique_ptr<Compressor> compressor_;
  std::unique_ptr<SerialExecutor> executor_;
  // Overlap accounting (training thread only).
  std::chrono::steady_clock::time_point first_launch_;
  double window_s_ = 0;
  double exposed_s_ = 0;
};

}  // namespace convoy::trainer

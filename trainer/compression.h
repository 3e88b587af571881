// Gradient compression for the hooks' bucketed all-reduce (trainer/ddp.h): the bucket is
// compressed before the backend sees it and decompressed after, so it works the same over
// Gloo and NCCL.
//
// - "bf16" / "fp16": each rank sends its bucket (already divided by the world size) as 16-bit
//   floats; the ranks exchange them with all-gathers of kHalfChunkElements at a time, all
//   issued before the first is waited for, and every rank adds the world's copies in float32.
//   Half the bytes of a float32 all-reduce at a world of two; the additions stay float32 and
//   vectorised (Gloo's own float16 all-reduce adds in float16, slowly, and 1.13's
//   Gloo has no bfloat16: bfloat16 travels as its bits, typed float16, which an all-gather
//   copies untouched). bf16 carries what rounding left out of one step into the next (error
//   feedback), fp16 does not (bf16_error_feedback below).
// - "powersgd": rank-r PowerSGD (Vogels et al., 2019) as PyTorch's powerSGD_hook: tensors of
//   2+ dimensions, viewed as n x m matrices, are sent as P (n x r) and Q (m x r) where that is
//   at least twice smaller; the others (biases, 1-dimensional) are all-reduced as they are.
//   Error feedback (what compression left out is added to the next step's gradient) and warm
//   start (Q is reused across steps). The first `start_step` steps are all-reduced
//   uncompressed, and so is a bucket under kPowerSgdMinBucketElements. Three collectives per
//   bucket: the uncompressed part and P, then Q.
//
// Every collective is issued by one thread per GradSync (SerialExecutor), bucket after bucket
// in launch order, so that the ranks' collectives match.
#pragma once

#include <torch/types.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainer/dist.h"

namespace convoy::trainer {

struct CompressionOptions {
  std::string kind = "none";  // none | bf16 | fp16 | powersgd (auto is resolved by the caller)
  int powersgd_rank = 2;
  int64_t powersgd_start_step = 0;
  uint64_t seed = 0;  // PowerSGD's first Q, the same on every rank
  // bf16's error feedback: what rounding to bfloat16 left out of a bucket is added to the next
  // step's. Over five seeds one epoch of the Fashion-MNIST CNN ended 0.31 points under `none`
  // on average without it (up to 0.64), 0.11 with it (up to 0.29). fp16 has none: its rounding
  // is 8 times finer, and with error feedback it did no better (0.33 under, against 0.19).
  // Off only to show what it does.
  bool bf16_error_feedback = true;
  // PowerSGD's error feedback (PyTorch's use_error_feedback); off only to show what it does.
  bool powersgd_error_feedback = true;
};

// The parameters of one bucket: shape of each, and where it starts in the flat bucket.
struct BucketLayout {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> offsets;
  int64_t numel = 0;  // the gradients' part of the bucket
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  // Replaces `flat` (this rank's gradients of bucket `bucket`, divided by the world size, laid
  // out as `layout`) with the sum over ranks, within the compression's error. Collective:
  // every rank calls it for the same buckets in the same order. Blocks; throws when a
  // collective fails. Called from one thread at a time.
  virtual void Reduce(size_t bucket, torch::Tensor flat, const BucketLayout& layout) = 0;
  // After every bucket of a synchronising step was reduced (counts PowerSGD's steps).
  virtual void EndStep() {}
  // The step just reduced is not applied (a bad step, trainer/bad_steps.h): drops what it
  // would carry into the next one (error feedback, PowerSGD's warm start), which a non-finite
  // gradient would poison for good. The next step starts as the first did (the same seeded Q
  // on every rank). Between steps, when no Reduce is in flight.
  virtual void Forget() {}
};

// The 16-bit paths exchange a bucket in chunks of this many elements (512 KiB on the wire).
inline constexpr int64_t kHalfChunkElements = 256 * 1024;

// PowerSGD reduces a bucket smaller than this (128 KiB of float32) uncompressed, in one
// all-reduce: compressing it takes two more collectives after it, whose round trips cost more
// than the bytes they save (the Fashion-MNIST CNN's last bucket, its convolutions, is 76 KB:
// compressed it made PowerSGD 3-7 % slower than no compression at 10 Gbit/s).
inline constexpr int64_t kPowerSgdMinBucketElements = 32 * 1024;

// kind "none" gives nullptr. Throws std::invalid_argument for an unknown kind.
std::unique_ptr<Compressor> MakeCompressor(const CompressionOptions& options, Dist& dist);

// One thread running tasks in the order they were submitted. Destruction waits for the
// queued tasks.
class SerialExecutor {
 public:
  SerialExecutor();
  ~SerialExecutor();
  std::future<void> Submit(std::function<void()> task);

 private:
  void Run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> queue_;  // guarded by mu_
  bool stop_ = false;                             // guarded by mu_
  std::thread thread_;
};

// PowerSGD's orthogonalisation (Gram-Schmidt over the columns, in place), exposed for tests.
void OrthogonalizeColumns(torch::Tensor matrix, double epsilon = 1e-8);

}  // namespace convoy::trainer

// The ranges of the built-in trainer's options, defined once. The job spec's validator
// (spec/job_spec_validation.cc) and the trainer's own flags (trainer/options.cc) both read
// them, so that a spec accepted at submit is never refused by every rank at its start.
// Header only and without dependencies: the trainer also builds on its own against a CUDA
// LibTorch (trainer/CMakeLists.txt).
#pragma once

#include <cstdint>

namespace convoy::trainer_limits {

// Step counts and intervals (max_steps, checkpoint_every, snapshot_every,
// powersgd_start_step) and the seed: [0, 2^40].
inline constexpr int64_t kMaxSteps = int64_t{1} << 40;
inline constexpr int64_t kMaxSeed = int64_t{1} << 40;
inline constexpr int64_t kMinEpochs = 1;
inline constexpr int64_t kMaxEpochs = 10000;
inline constexpr int64_t kMaxBatchSize = 65536;
inline constexpr int64_t kMaxAccumulate = 1024;
inline constexpr int64_t kMaxPowerSgdRank = 64;
// max_bad_steps: [1, kMaxBadSteps]; absent: kDefaultMaxBadSteps (the trainer's Options
// default, checked by tests/trainer/trainer_spec_contract_test.cc).
inline constexpr int64_t kMaxBadSteps = 1000000;
inline constexpr int64_t kDefaultMaxBadSteps = 3;
// lr: greater than 0, at most kMaxLr.
inline constexpr double kMaxLr = 1000;
// momentum: [0, kMaxMomentum].
inline constexpr double kMaxMomentum = 0.999999;
// clip_grad_norm: [0, kMaxClipGradNorm]; 0: no clipping.
inline constexpr double kMaxClipGradNorm = 1e9;
// bucket_mb: [kMinBucketMb, kMaxBucketMb].
inline constexpr double kMinBucketMb = 0.001;
inline constexpr double kMaxBucketMb = 1024;

}  // namespace convoy::trainer_limits

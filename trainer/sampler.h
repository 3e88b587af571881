// Which samples each optimiser step takes, by global position: a world-size independent
// sampler, so that a job can resume at another WORLD_SIZE without repeating or skipping a
// sample of the epoch.
//
// An epoch visits a seeded permutation of the n training samples (data.h, EpochPermutation).
// Its position P is the number of the permutation's entries already consumed. A step at world
// size W, per-rank batch B and accumulation A takes the next c = min(A·B·W, n − P) entries:
// rank r takes those at P + r, P + r + W, P + r + 2W, ... (below P + c), and its micro-batch
// a is the a-th run of B of them. So for P = 0 and full steps the order is DistributedSampler's
// (rank r takes positions r, r + W, ...), and the last step of an epoch takes the remainder,
// split as evenly as the striding gives (ranks differ by at most one sample; a micro-batch,
// even a rank's whole share, may be empty). Every entry of every epoch is used exactly once.
//
// No LibTorch here: pure functions of (n, P, W, B, A), and the per-epoch use counts that make
// the "exactly once" checkable across checkpoints, snapshots and world-size changes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace convoy::trainer {

struct StepShape {
  int world = 1;       // W
  int batch = 1;       // B, per rank per micro-batch
  int accumulate = 1;  // A
  int64_t full() const { return int64_t{batch} * accumulate * world; }
};

// c: how many samples the step starting at `position` of an n-sample epoch takes.
int64_t StepSamples(int64_t n, int64_t position, const StepShape& shape);

// How many of a step's `count` samples rank `rank` takes.
int64_t RankSamples(int64_t count, int rank, int world);

// Steps left in the epoch from `position`: ceil((n − position) / (A·B·W)).
int64_t StepsLeft(int64_t n, int64_t position, const StepShape& shape);

// The epoch positions of rank `rank`'s micro-batch `micro` (0 ≤ micro < A) of the step that
// starts at `position`. Possibly empty (the epoch's last step).
std::vector<int64_t> MicroBatchPositions(int64_t n, int64_t position, const StepShape& shape,
                                         int rank, int micro);

// How often each sample was used in the current epoch. Every rank keeps the global counts:
// the assignment is a pure function of (seed, epoch, P, W), so a rank adds every rank's share.
class SampleCounts {
 public:
  SampleCounts() = default;
  explicit SampleCounts(int64_t n) : counts_(static_cast<size_t>(n), 0) {}
  // Adds every rank's micro-batches of the step at `position` (through MicroBatchPositions,
  // so that the check covers the striding itself). `permutation`: the epoch's order.
  void AddStep(const std::vector<int64_t>& permutation, int64_t position, const StepShape& shape);
  // Counts saturate at 255 (a sample used that often is "repeated" all the same).
  const std::vector<uint8_t>& counts() const { return counts_; }
  std::vector<uint8_t>& mutable_counts() { return counts_; }
  int64_t size() const { return static_cast<int64_t>(counts_.size()); }
  void Reset() { std::fill(counts_.begin(), counts_.end(), 0); }

  struct Check {
    int64_t samples = 0;   // n
    int64_t repeated = 0;  // used more than once
    int64_t skipped = 0;   // never used
    bool ok() const { return repeated == 0 && skipped == 0; }
  };
  Check Verify() const;

 private:
  std::vector<uint8_t> counts_;
};

// "epoch E sample check: N of N samples seen exactly once", or
// "epoch E sample check FAILED: K repeated, M skipped".
std::string EpochCheckLine(int64_t epoch, const SampleCounts::Check& check);

}  // namespace convoy::trainer

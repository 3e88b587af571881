// The sampler by global position (trainer/sampler.h): whatever sequence of world sizes,
// batch sizes and accumulations an epoch is trained at (a job resumed at other sizes), every
// sample of every epoch is used exactly once; at position 0 with full steps the order is
// DistributedSampler's; the per-epoch counts find repeats and gaps.
#include "trainer/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "trainer/data.h"

namespace convoy::trainer {
namespace sampler_test {

TEST(SamplerTest, RandomShapeSequencesTileEveryEpochExactlyOnce) {
  std::mt19937 rng(20261125);
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = pick(1, 700);
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = (i * 7919) % n;  // any order
    std::set<int64_t> distinct(perm.begin(), perm.end());
    if (static_cast<int64_t>(distinct.size()) != n) std::iota(perm.begin(), perm.end(), 0);
    SampleCounts counts(n);
    int64_t position = 0;
    StepShape shape;
    int steps_left_at_shape = 0;
    while (position < n) {
      if (steps_left_at_shape == 0) {  // an attempt at another size resumes here
        shape = StepShape{pick(1, 9), pick(1, 17), pick(1, 4)};
        steps_left_at_shape = pick(1, 6);
      }
      const int64_t count = StepSamples(n, position, shape);
      ASSERT_GT(count, 0);
      ASSERT_EQ(count, std::min(shape.full(), n - position));
      ASSERT_EQ(StepsLeft(n, position, shape), (n - position + shape.full() - 1) / shape.full());
      // The ranks' micro-batches are exactly [position, position + count), each once.
      std::vector<int> hit(static_cast<size_t>(count), 0);
      int64_t smallest = count, largest = 0;
      for (int r = 0; r < shape.world; ++r) {
        int64_t mine = 0;
        for (int a = 0; a < shape.accumulate; ++a) {
          const auto pos = MicroBatchPositions(n, position, shape, r, a);
          ASSERT_LE(static_cast<int64_t>(pos.size()), shape.batch);
          for (int64_t p : pos) {
            ASSERT_GE(p, position);
            ASSERT_LT(p, position + count);
            ++hit[static_cast<size_t>(p - position)];
          }
          mine += static_cast<int64_t>(pos.size());
        }
        ASSERT_EQ(mine, RankSamples(count, r, shape.world));
        smallest = std::min(smallest, mine);
        largest = std::max(largest, mine);
      }
      EXPECT_LE(largest - smallest, 1) << "the remainder is split as evenly as striding gives";
      for (int h : hit) ASSERT_EQ(h, 1);
      counts.AddStep(perm, position, shape);
      position += count;
      --steps_left_at_shape;
    }
    const SampleCounts::Check check = counts.Verify();
    EXPECT_TRUE(check.ok()) << "n " << n << ": " << check.repeated << " repeated, " << check.skipped
                            << " skipped";
    EXPECT_EQ(check.samples, n);
  }
}

// Before global positions, rank r took positions r, r + W, ... of the epoch's permutation
// (DistributedSampler), in micro-batches of B; full steps from position 0 keep that order.
TEST(SamplerTest, FullStepsFromTheStartAreDistributedSamplersOrder) {
  const int64_t n = 1000;
  for (const StepShape shape :
       {StepShape{1, 64, 1}, StepShape{2, 32, 1}, StepShape{3, 16, 2}, StepShape{4, 8, 3}}) {
    for (int r = 0; r < shape.world; ++r) {
      std::vector<int64_t> old_order;  // rank r's list as DistributedSampler makes it
      for (int64_t p = r; p < n; p += shape.world) old_order.push_back(p);
      std::vector<int64_t> now;
      for (int64_t p = 0; p + shape.full() <= n; p += shape.full()) {
        for (int a = 0; a < shape.accumulate; ++a) {
          const auto mb = MicroBatchPositions(n, p, shape, r, a);
          ASSERT_EQ(static_cast<int>(mb.size()), shape.batch);
          now.insert(now.end(), mb.begin(), mb.end());
        }
      }
      ASSERT_LE(now.size(), old_order.size());
      EXPECT_TRUE(std::equal(now.begin(), now.end(), old_order.begin()))
          << "world " << shape.world << " rank " << r;
    }
  }
}

TEST(SamplerTest, TheLastStepTakesTheRemainderAndARankMayHaveNothing) {
  // 10 samples at world 4, batch 2: a full step (8), then 2 samples for ranks 0 and 1 only.
  const StepShape shape{4, 2, 1};
  EXPECT_EQ(StepSamples(10, 8, shape), 2);
  EXPECT_EQ(MicroBatchPositions(10, 8, shape, 0, 0), (std::vector<int64_t>{8}));
  EXPECT_EQ(MicroBatchPositions(10, 8, shape, 1, 0), (std::vector<int64_t>{9}));
  EXPECT_TRUE(MicroBatchPositions(10, 8, shape, 2, 0).empty());
  EXPECT_TRUE(MicroBatchPositions(10, 8, shape, 3, 0).empty());
  EXPECT_EQ(StepsLeft(10, 0, shape), 2);
  EXPECT_EQ(StepsLeft(10, 10, shape), 0);
}

TEST(SamplerTest, CountsReportRepeatsAndGaps) {
  const std::vector<int64_t> perm{3, 1, 4, 0, 2, 5};
  SampleCounts counts(6);
  const StepShape shape{2, 1, 1};
  counts.AddStep(perm, 0, shape);  // positions 0, 1
  counts.AddStep(perm, 0, shape);  // again: a resume that repeated a step
  counts.AddStep(perm, 4, shape);  // positions 4, 5; 2 and 3 skipped
  const SampleCounts::Check c = counts.Verify();
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.repeated, 2);
  EXPECT_EQ(c.skipped, 2);
  EXPECT_EQ(EpochCheckLine(4, c), "epoch 4 sample check FAILED: 2 repeated, 2 skipped");
  SampleCounts good(6);
  good.AddStep(perm, 0, StepShape{3, 2, 1});
  EXPECT_EQ(EpochCheckLine(0, good.Verify()),
            "epoch 0 sample check: 6 of 6 samples seen exactly once");
}

TEST(SamplerTest, EpochPermutationIsSeededBySeedPlusEpoch) {
  const auto a = EpochPermutation(103, 7, 3);
  EXPECT_EQ(a, EpochPermutation(103, 7, 3));
  EXPECT_EQ(a, EpochPermutation(103, 8, 2));  // seed + epoch, as DistributedSampler
  EXPECT_NE(a, EpochPermutation(103, 7, 4));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 103; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
}

}  // namespace sampler_test
}  // namespace convoy::trainer

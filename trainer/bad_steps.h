// Bad steps (issue 42): a step whose loss is not finite on any rank, or whose global gradient
// norm is not finite when the trainer clips it, is never applied. Every rank learns it alike:
// each rank's "my loss is not finite" rides as a control float in the step's gradient
// all-reduce (trainer/ddp.h, GradSync::kControlFloats), whose sum every rank reads; the norm is
// computed from the averaged gradients, which that all-reduce leaves bit-identical on every rank
// (and a non-finite element makes it non-finite in any summation order). A skipped step still
// takes its samples and its step number: its batch is dropped, not retried. After
// --max-bad-steps of them in a row the ranks rewind, in the same process, to the newest good
// state any of them holds (a snapshot, or rank 0's checkpoint; trainer/resume.h) and go on from
// where they are: the batches from that state to the last bad step are not trained again.
//
// This file: the count and the decision, and the test hook's step list. No LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/rank_contract.h"

namespace convoy::trainer {

// The metric record names (common/rank_contract.h): the "step" records' count of bad steps,
// and the record written at a rewind.
using rank_contract::kMetricBadSteps;
using rank_contract::kMetricRewinds;
using rank_contract::kMetricRewoundTo;
using rank_contract::kRecordRewind;

// Test hook (tests/trainer/bad_steps_test.cc): a rank whose environment has
// CONVOY_TEST_NAN_LOSS_STEPS="7,13-15" makes its loss NaN (and so its gradients) at those
// global steps. For tests only: training with it set is training with deliberate NaNs.
inline constexpr const char* kTestNanLossStepsEnv = "CONVOY_TEST_NAN_LOSS_STEPS";

// Parses "7,13-15" (steps >= 1, ranges inclusive, at most kMaxListedSteps in all) into `out`,
// sorted. Returns "" or what is wrong.
std::string ParseStepList(const std::string& text, std::vector<int64_t>* out);
inline constexpr int64_t kMaxListedSteps = 100000;

// Counts bad steps and says when to rewind. Training thread only; every rank feeds it the same
// agreed verdicts, so every rank decides alike.
class BadStepCounter {
 public:
  explicit BadStepCounter(int64_t max_in_a_row) : max_in_a_row_(max_in_a_row) {}
  // After each step: whether it was bad. True when this makes max_in_a_row in a row: rewind.
  bool Record(int64_t step, bool bad);
  int64_t in_a_row() const { return in_a_row_; }
  int64_t total() const { return total_; }
  int64_t first_of_run() const { return first_of_run_; }  // the current run's first bad step
  int64_t max_in_a_row() const { return max_in_a_row_; }
  // Whether a rewind may go ahead: not when no step passed since the last one (the state it
  // would load is the one that last rewind loaded, and its batches since were all bad too).
  bool MayRewind() const { return rewinds_ == 0 || passed_since_rewind_; }
  // The rewind was done: the run of bad steps ends.
  void Rewound();
  int64_t rewinds() const { return rewinds_; }

 private:
  const int64_t max_in_a_row_;
  int64_t in_a_row_ = 0;
  int64_t total_ = 0;
  int64_t first_of_run_ = 0;
  int64_t rewinds_ = 0;
  bool passed_since_rewind_ = false;
};

}  // namespace convoy::trainer

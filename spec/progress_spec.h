// The job spec's fields for sick ranks (README "When nodes are sick"): stragglers and hangs
// named from the step records ranks report. Each field's default and range, the one place
// that reads them (the coordinator's StepWatch and ProgressWatch use the accessors below,
// never the raw fields), and their validation, called by FindSpecProblems.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"
#include "spec/job_spec_validation.h"

namespace convoy {

// straggler_factor: a rank is a straggler while its step time stays at or above this many
// times its peers' median. 1.5 (the default) names a rank half again as slow as the others,
// which synchronous training pays for on every step, and stays above the jitter of a
// loaded machine (within 1.2x here); 0 turns naming off. At most 100.
inline constexpr double kDefaultStragglerFactor = 1.5;
inline constexpr double kMinStragglerFactor = 1.05;
inline constexpr double kMaxStragglerFactor = 100;
// straggler_steps: the medians are over this many of the latest steps. 20 rides out a slow
// step (a checkpoint, a garbage collection) and still names a straggler within seconds.
inline constexpr int kDefaultStragglerSteps = 20;
inline constexpr int kMinStragglerSteps = 3;
inline constexpr int kMaxStragglerSteps = 10000;
// hang_steps: median step times without any record from any rank before the attempt
// counts as a collective hang; 0 (the default) is off, because a script may pause every
// rank at once on purpose (an evaluation, a checkpoint) without saying so. The wait is never
// under kMinProgressHangMs, whatever the step time: 10 s covers what a script does between two
// reports without saying so on a loaded machine (train_ddp.py's final evaluation of 5,000
// images took over 3 s on 2 shared cores, which a 3 s floor named a hang), and is still far
// under any collective timeout (Gloo's and NCCL's default: 30 min).
inline constexpr int kMaxHangSteps = 1000000;
inline constexpr int kMinHangSteps = 3;
inline constexpr int64_t kMinProgressHangMs = 10000;

// The values a job runs with (its spec's, or the defaults).
double StragglerFactor(const v1::JobSpec& spec);
int StragglerSteps(const v1::JobSpec& spec);
// on_straggler: replace.
bool ReplacesStragglers(const v1::JobSpec& spec);
int HangSteps(const v1::JobSpec& spec);

// The problems of these fields, each naming its field ("straggler_factor: must be 0 or
// between 1.05 and 100, got 1"), in the order of the fields.
std::vector<SpecProblem> FindProgressSpecProblems(const v1::JobSpec& spec);

}  // namespace convoy

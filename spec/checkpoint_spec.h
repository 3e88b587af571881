// The job spec's checkpoint policy (README "Checkpoints kept by policy"):
//   checkpoint: {keep_last: 2, keep_best: {metric: test_accuracy, goal: max, count: 1}}
//   resume_from: j-000004
//   resume_checkpoint: best        # or latest (the default)
// Each field's default and range, their validation (called by FindSpecProblems), and the one
// rule that says which checkpoints a policy keeps and which is the best: the worker applies it
// to what it deletes (worker/files/checkpoint_keeper.h), the coordinator to what `resume_from`
// with `resume_checkpoint: best` starts from. Pure code; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"
#include "spec/job_spec_validation.h"

namespace convoy {

// checkpoint.keep_last and checkpoint.keep_best.count: 0 (the rule keeps none) to this many.
// A thousand checkpoints of a large model are terabytes: more is a mistake, not a policy.
inline constexpr int kMaxCheckpointsKept = 1000;
// checkpoint.keep_best.metric: a key of the checkpoint's record ("test_accuracy"), as
// metric records name values (worker/exec/metrics_parse.h keeps names of at most 64 bytes).
inline constexpr size_t kMaxCheckpointMetricBytes = 64;
// checkpoint.keep_best.goal: "max" (more is better; the default) or "min".
inline constexpr const char* kGoalMax = "max";
inline constexpr const char* kGoalMin = "min";
// resume_checkpoint: "latest" (the default: the source job's newest checkpoint) or "best".
inline constexpr const char* kResumeLatest = "latest";
inline constexpr const char* kResumeBest = "best";
// Why a checkpoint is kept (CheckpointInfo.kept_as).
inline constexpr const char* kKeptAsLast = "last";
inline constexpr const char* kKeptAsBest = "best";

// Whether the job has a checkpoint policy: its worker keeps only what the policy keeps (and
// the built-in trainer leaves the pruning of its checkpoints to the worker).
bool HasCheckpointPolicy(const v1::JobSpec& spec);
// keep_best.goal as the job runs with it: true for "max" (or empty).
bool GoalIsMax(const v1::KeepBest& keep_best);
// Whether resume_checkpoint asks for the best checkpoint.
bool ResumesBest(const v1::JobSpec& spec);

// The problems of `checkpoint` and `resume_checkpoint`, each naming its field
// ("checkpoint.keep_best.goal: must be max or min, got 'up'"), in the order of the fields.
std::vector<SpecProblem> FindCheckpointSpecProblems(const v1::JobSpec& spec);

// One checkpoint as the policy sees it.
struct CheckpointCandidate {
  int64_t step = 0;
  // Order of arrival (later is newer among equal steps).
  int64_t order = 0;
  std::map<std::string, double> metrics;
};

// Which of `all` `policy` keeps, by index into `all`: for each kept one why ("last", "best",
// or both, in that order); one left out is deleted. The union of the keep_last newest (by
// step, then arrival) and the keep_best.count best by keep_best.metric (ties: the newer
// first); a checkpoint without the metric is never "best". The newest one is always kept (as
// "last"), whatever the policy says: a job resumes from it.
std::map<size_t, std::vector<std::string>> ApplyCheckpointPolicy(
    const v1::CheckpointPolicy& policy, const std::vector<CheckpointCandidate>& all);

// The best of `kept` by `keep_best` (the same order as ApplyCheckpointPolicy's "best"); nullopt
// when none carries the metric.
std::optional<size_t> BestCheckpoint(
    const v1::KeepBest& keep_best,
    const google::protobuf::RepeatedPtrField<v1::CheckpointInfo>& kept);

}  // namespace convoy

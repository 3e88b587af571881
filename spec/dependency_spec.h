// The job spec's `after` (README "Sweeps, dependencies and checkpoints", "Dependencies"): the
// jobs a job waits for, as Slurm's --dependency=afterok/afternotok/afterany. Its limits, the
// words of its conditions, its validation (called by FindSpecProblems) and `convoy submit
// --after`, defined once here; the coordinator's Dependencies controller
// (coordinator/control/dependencies.h) acts on what this accepts.
//
//   after:
//     - job: j-000004            # a job id, as `convoy submit` printed it
//       when: succeeded          # succeeded (the default) | failed | ended
//
// `convoy submit job.yaml --after j-000004 --after j-000005:failed` appends to the same list.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/common.pb.h"
#include "spec/job_spec_validation.h"

namespace convoy {

// A job waits for at most this many others: a pipeline step names its inputs, not a sweep's
// every trial (a sweep is one job to wait for).
inline constexpr int kMaxDependencies = 16;

// The condition a dependency asks for: the field's own value, with UNSPECIFIED (an RPC
// that left `when` out) read as DEPENDENCY_SUCCEEDED, the YAML default.
v1::DependencyCondition ConditionOf(const v1::JobDependency& dependency);

// "succeeded", "failed", "ended": the YAML word of a condition (UNSPECIFIED: "succeeded").
std::string ConditionWord(v1::DependencyCondition when);
// The condition a YAML word names; nullopt for any other word.
std::optional<v1::DependencyCondition> ParseConditionWord(const std::string& word);
// "j-000004 to succeed", "j-000004 to fail", "j-000004 to end": what a waiting job waits for.
std::string WaitText(const v1::JobDependency& dependency);

// The problems of `after`, each naming its field: "after[0].job: 'x' is not a job id (j-
// and digits)", "after[1].when: must be succeeded, failed or ended", "after: at most 16
// jobs, got 17", "after[2].job: j-000004 is named twice (after[0])".
std::vector<SpecProblem> FindDependencySpecProblems(const v1::JobSpec& spec);

// Appends `convoy submit --after` values to `spec.after`: each "JOB" or "JOB:WHEN" (WHEN one
// of the words above). INVALID_ARGUMENT naming the flag for a value of another shape; the
// job ids themselves are checked with the rest of the spec (FindDependencySpecProblems).
Status AppendAfterFlags(const std::vector<std::string>& values, v1::JobSpec* spec);

}  // namespace convoy

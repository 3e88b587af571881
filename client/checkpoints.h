// `convoy checkpoints JOB` (README "Checkpoints kept by policy"): the checkpoints a job keeps
// now, newest first: where each is (its path in the job's checkpoint directory, and the
// worker that holds it), its step and metrics, and why it is kept (last, best).
#pragma once

#include <cstdint>
#include <string>

#include "client/commands.h"
#include "convoy/v1/job.pb.h"
#include "convoy/v1/worker.pb.h"

namespace convoy {

// The command's help: what --help prints under it.
inline constexpr const char* kCheckpointsHelpFooter =
    "A job's checkpoints are kept by its spec's policy, e.g.\n"
    "  checkpoint: {keep_last: 2, keep_best: {metric: test_accuracy, goal: max, count: 1}}\n"
    "the worker deletes the rest. Resume a new job from the best one with\n"
    "  resume_from: j-000004\n  resume_checkpoint: best\n"
    "Examples:\n  convoy checkpoints j-000004\n  convoy checkpoints j-000004 -o json";

// `convoy checkpoints JOB`: GetJob, then the table (PATH WORKER STEP METRICS KEPT_AS), or
// {"job_id", "job_uid", "checkpoints": [...]} with -o json|yaml.
int CheckpointsCommand(CoordinatorClient& c, const std::string& job, const CommandOptions& options);

// The table of `job`'s checkpoints, or a line saying there are none (and why, when the job has
// no policy).
std::string FormatCheckpoints(const v1::Job& job);
// What -o json|yaml renders: the job's id and uid and its checkpoints.
v1::CheckpointsKept CheckpointsOf(const v1::Job& job);

}  // namespace convoy

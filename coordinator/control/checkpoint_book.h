// The coordinator's side of checkpoints kept by policy (README "Checkpoints kept by policy"):
// Job.checkpoints, what the workers that hold a job's checkpoints last reported of them
// (CheckpointsKept, each replacing what that worker had reported), merged newest first and
// kept with the job (persisted with its record, so a restarted coordinator still lists them
// before the workers report again); and `resume_from: JOB` with `resume_checkpoint: best`,
// resolved at submit to the best checkpoint the source job keeps. Pure functions on protos;
// the JobManager calls them with the coordinator's lock held.
#pragma once

#include <string>

#include "common/status.h"
#include "convoy/v1/job.pb.h"
#include "convoy/v1/worker.pb.h"

namespace convoy {

// Replaces in `job` the checkpoints `worker` reported before with `kept`'s (each named by
// `worker`), newest first (by step, then time). Returns whether the list changed.
bool MergeCheckpointsKept(v1::Job* job, const std::string& worker, const v1::CheckpointsKept& kept);

// With `spec.resume_checkpoint` "best": sets resume->checkpoint_file to the best checkpoint
// `from` keeps by its policy's keep_best metric and goal. FAILED_PRECONDITION naming
// resume_checkpoint when `from` has no keep_best policy or keeps no checkpoint marked with its
// metric. "latest" (or empty) leaves it empty: the newest.
Status ResolveResumeCheckpoint(const v1::JobSpec& spec, const v1::Job& from,
                               v1::ResumeSource* resume);

}  // namespace convoy

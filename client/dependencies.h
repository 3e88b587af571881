// The CLI's side of dependencies between jobs (README "Sweeps, dependencies and
// checkpoints", "Dependencies"): how `after` and what a job still waits for read in
// `convoy status` and `convoy queue`. `convoy submit --after` fills JobSpec.after
// (spec/dependency_spec.h: AppendAfterFlags); `convoy cancel --cascade` sets
// CancelJobRequest.cascade.
#pragma once

#include <string>

#include "convoy/v1/job.pb.h"

namespace convoy {

// The lines of `convoy status` about `after`: what the job waits for, one a line
// ("  waiting:  for j-000004 to succeed"), and its dependencies as submitted
// ("  after:    j-000004 (succeeded), j-000005 (failed)"); empty for a job without `after`.
std::string FormatDependencies(const v1::Job& job);

// Whether `convoy queue` lists the job: it has a place in the queue, or waits for other jobs.
bool ShownInQueue(const v1::Job& job);
// The queue's "#" cell: the position, or "-" for a job that waits for other jobs (it has no
// place in the queue until they end).
std::string QueuePositionCell(const v1::Job& job);
// Sort key of `convoy queue`: the queue's order first, then the jobs that wait for others,
// oldest first.
bool QueueOrderLess(const v1::Job& a, const v1::Job& b);

}  // namespace convoy

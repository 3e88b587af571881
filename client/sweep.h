// Sweeps in the CLI (README "Sweeps"): `convoy submit --sweep PATH=V1,V2,... --max-parallel N
// --sweep-metric NAME:max|min`, a sweep's row in `convoy list`, and its trials in
// `convoy status SWEEP`. A sweep is one job (Job.sweep); its trials are jobs with
// Job.sweep_id.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/job.pb.h"

namespace convoy {

// What `convoy submit` was given for a sweep.
struct SweepArgs {
  std::vector<std::string> params;  // --sweep PATH=V1,V2,... (repeatable)
  int max_parallel = 0;             // --max-parallel (> 0: overrides the spec's)
  std::string metric;               // --sweep-metric NAME or NAME:max / NAME:min
};

// Adds the flags to spec.sweep (making one when the spec has none). INVALID_ARGUMENT naming
// the flag.
Status ApplySweepArgs(const SweepArgs& args, v1::JobSpec* spec);
// For a spec with a sweep: every trial checked as the coordinator checks it (ExpandSweep),
// so that a bad path or value is refused before anything is uploaded.
Status CheckSweepTrials(const v1::JobSpec& spec);

// "sweep 2/6 done, 2 running; best j-000004 test_accuracy 0.8412": a sweep's summary in one
// line (its row's message in `convoy list`); "trial 2 of j-000001: trainer.lr=0.01" for a
// trial; the job's message otherwise.
std::string ListMessage(const v1::Job& job);

// The trials section of `convoy status SWEEP`: each trial's parameters, state, best metric
// and step, the best trial, and why ASHA stopped what it stopped. Empty for other jobs.
std::string FormatSweepStatus(const v1::Job& job);

}  // namespace convoy

// A job spec's `sweep:` section (README "Sweeps"; SweepSpec in common.proto): each field's
// default and range, the one place that reads them (the coordinator's SweepController uses
// ResolveSweep, never the raw fields), their validation (called by FindSpecProblems), the
// trials a sweep expands to, and `convoy submit --sweep PATH=V1,V2,...`.
//
//   sweep:
//     parameters: {trainer.lr: [0.1, 0.01, 0.001], trainer.batch_size: [32, 64]}
//     metric: test_accuracy       # a field of the trials' metric records; "loss" by default
//     goal: max                   # max: more is better; min (loss's default)
//     max_parallel: 2             # trials unfinished at once (default 1)
//     sampling: grid              # grid (every combination) | random (trials, seed)
//     early_stop: asha            # none | asha (asha: {min_steps: 100, reduction_factor: 3})
//
// A parameter's path is a spec field as `--set` takes it (spec/spec_overrides.h); its values
// are YAML scalars applied as `--set PATH=VALUE` applies them. Whether a path and its values
// make valid trial specs is checked by ExpandSweep (spec/sweep_trials.h), which applies them.
//
// Threading: free functions without shared state; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/common.pb.h"
#include "convoy/v1/job.pb.h"
#include "spec/job_spec_validation.h"

namespace convoy {

// max_parallel: trials unfinished (made and not ended) at once. 1 (the default) runs them
// one after another, which never takes more of the cluster than one job; at most 256 (a
// sweep wider than that is many sweeps' worth of quota at once).
inline constexpr int kDefaultSweepMaxParallel = 1;
inline constexpr int kMaxSweepParallel = 256;
// Trials of one sweep (grid combinations, or random `trials`): each becomes a job record
// kept with the sweep, and the sweep's status lists them all (GetJob's reply stays small).
inline constexpr int kMaxSweepTrials = 1000;
inline constexpr int kMaxSweepParameters = 16;
inline constexpr int kMaxSweepValues = 1000;         // values of one parameter
inline constexpr size_t kMaxSweepValueBytes = 4096;  // one value, as text
inline constexpr size_t kMaxSweepMetricBytes = 64;   // a metric's name
// sampling: random without a seed draws with this one (a sweep is reproducible by default).
inline constexpr int64_t kDefaultSweepSeed = 0;
// asha.min_steps: the first rung, in optimiser steps (100: the built-in trainer's first
// evaluation is due well before a hopeless run has cost much); at most 10^12.
inline constexpr int64_t kDefaultAshaMinSteps = 100;
inline constexpr int64_t kMaxAshaMinSteps = 1000000000000LL;
// asha.reduction_factor: rungs grow, and the survivors of a rung shrink, by this factor (3,
// as in the ASHA paper and Ray Tune); 2 to 100.
inline constexpr int kDefaultAshaReductionFactor = 3;
inline constexpr int kMinAshaReductionFactor = 2;
inline constexpr int kMaxAshaReductionFactor = 100;

// What a sweep runs with: its spec's values or the defaults (meaningful for a valid sweep).
struct SweepSettings {
  std::string metric;     // "loss" when absent
  bool maximize = false;  // goal max
  int max_parallel = kDefaultSweepMaxParallel;
  bool random = false;  // sampling random
  int trials = 0;       // random: how many drawn
  int64_t seed = kDefaultSweepSeed;
  bool asha = false;  // early_stop asha
  int64_t min_steps = kDefaultAshaMinSteps;
  int reduction_factor = kDefaultAshaReductionFactor;
};
SweepSettings ResolveSweep(const v1::SweepSpec& sweep);

// The problems of spec.sweep (fields "sweep.*": "sweep.goal: must be one of max, min, got
// 'up'", "sweep.parameters[1].path: ...", "sweep.asha.reduction_factor: ..."), in the order
// of its fields; none when the spec has no sweep.
std::vector<SpecProblem> FindSweepProblems(const v1::JobSpec& spec);

// One trial's values, in the sweep's parameter order.
using TrialValues = std::vector<v1::TrialParameter>;

// Every trial of a valid sweep, in order: grid sampling makes every combination with the
// last parameter varying fastest; random sampling draws `trials` combinations from a
// generator seeded with `seed` (a parameter with values: one of them, uniformly; one with
// min and max: a real number, uniform or, with log, log-uniform, written with 6 significant
// digits), so the same spec always makes the same trials.
std::vector<TrialValues> SweepTrialValues(const v1::SweepSpec& sweep);

// "trainer.lr=0.01": the --set a trial's value is applied as.
std::string TrialSet(const v1::TrialParameter& p);
// "trainer.lr=0.01 trainer.batch_size=64": a trial's values, for messages and the CLI.
std::string DescribeTrial(const TrialValues& values);

// `convoy submit --sweep PATH=V1,V2,...`: adds the parameter to `sweep` (values split at
// commas; a value cannot hold a comma: write such sweeps in the spec). INVALID_ARGUMENT
// naming --sweep for a flag without '=' or without a value.
Status AddSweepFlag(const std::string& flag, v1::SweepSpec* sweep);

// "0.8412": a metric value as messages and the CLI show it (4 significant digits; nan, inf).
std::string MetricText(double value);

}  // namespace convoy

// The parts of a sweep (spec/sweep_spec.h) that need the spec reader (convoy_spec_file): the
// `sweep:` section read from YAML, and a sweep expanded into its trials' specs, each value
// applied exactly as `--set PATH=VALUE` applies it (spec/spec_overrides.h, through
// OverrideJobSpec): one parser for both.
//
// Threading: free functions without shared state; any thread.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/common.pb.h"
#include "spec/sweep_spec.h"

namespace convoy {

// One trial of a sweep: its values and the spec it runs.
struct SweepTrial {
  TrialValues values;
  v1::JobSpec spec;
};

// The spec of the trial with `values`: `spec` without `sweep` (and without `after`: the
// sweep waits, its trials do not) with each value applied as `--set PATH=VALUE`, then
// validated as any spec. A field of `spec` that the override's round trip does not carry is
// kept as it was. INVALID_ARGUMENT with the override's or the validator's lines.
StatusOr<v1::JobSpec> TrialSpec(const v1::JobSpec& spec, const TrialValues& values);

// Every trial of spec.sweep (SweepTrialValues' order), each with its spec (TrialSpec).
// INVALID_ARGUMENT, one line per problem, each naming its field: the spec's own problems
// (ValidateJobSpec, the sweep's included), then a path that --set does not take
// ("sweep.parameters[1].path: trainer.lrr: unknown field; did you mean 'lr'?"), a value that
// does not fit its field ("sweep.parameters[0].values[2]: trainer.batch_size: expected an
// integer, got 'big'"; ".min"/".max" for a range), and a combination that makes an invalid
// spec ("sweep: trial 4 (nodes=64 procs_per_node=512): procs_per_node: ...").
StatusOr<std::vector<SweepTrial>> ExpandSweep(const v1::JobSpec& spec);

namespace spec_internal {

// An error of a section read by its own reader, and where it was written.
struct SectionError {
  std::string field;
  std::string message;
  YAML::Mark mark;
};
// What a section's reader found: its errors, and where each of its fields was written (so
// that the validator's later problems point at the line too).
struct SectionRead {
  std::vector<SectionError> errors;
  std::map<std::string, YAML::Mark> marks;
};

// Reads the `sweep:` mapping (`field` is "sweep") into `out`. `parameters` is a mapping of
// paths to a list of values or to {values: [...]} / {min: X, max: Y, log: true}, or a list
// of {path, values, min, max, log}; values are scalars (kept as written) or lists and
// mappings (kept as flow YAML, as --set reads them). Fields are named
// "sweep.parameters[i].path", "sweep.parameters[i].values[j]", "sweep.asha.min_steps", ...
SectionRead ReadSweepSection(const YAML::Node& node, const std::string& field, v1::SweepSpec* out);

}  // namespace spec_internal
}  // namespace convoy

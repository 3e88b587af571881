// Parsing job specs from YAML or JSON (DESIGN.md "Job spec") into v1::JobSpec.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/common.pb.h"
#include "spec/job_spec_validation.h"  // kMaxSpecBytes

namespace convoy {

// Parses a spec from YAML or JSON text (JSON when the first non-blank character is '{'; it
// is checked as strict JSON, then read like YAML, of which it is a subset). YAML keys are the
// proto field names, except: `procs_per_node: gpu` sets procs_per_node_gpu, `hang_timeout`
// (seconds) sets hang_timeout_s, `max_runtime` (seconds) sets max_runtime_s,
// `resize_interval` (seconds) sets resize_interval_s, and `memory_per_proc` (a size: `16Gi`,
// `512Mi`, `2G` or bytes) sets memory_per_proc_bytes. An absent `backend` becomes "gloo".
// `env` and `node_selector` values may be any scalar; they are kept as strings.
//
// `sets` are `convoy submit --set` overrides, "PATH=VALUE", applied in order (a later one
// wins) to the YAML tree before it is read, so that each is typed and checked exactly as the
// same field written in the file: PATH is a field ("nodes", "name") or a dotted path into a
// mapping ("trainer.max_steps", "env.OMP_NUM_THREADS", "node_selector.zone"; after "env." and
// "node_selector." the rest is one key, dots included), made where absent; VALUE is read as
// YAML ("300", "0.1", "gpu", "[python3, train.py]", "{lr: 0.1}"; empty is null).
//
// On error returns INVALID_ARGUMENT with every error of the spec, one a line: those with a
// place in the text first, in its order, then the rest (a missing field), then those of a
// --set. A line is prefixed with `source` and, where the spot is known, its line and column,
// then the field path; an error in a field that a --set wrote names the --set instead:
//   "job.yaml:7:15: trainer.batch_size: expected an integer, got 'abc'"
//   "job.yaml: procs_per_node: missing (a number of processes per node, or "gpu")"
//   "--set trainer.max_step=300: trainer.max_step: unknown field; did you mean 'max_steps'?"
// for unknown fields at any level, wrong types (quoted numbers and floats where integers
// are expected included), integer overflow, duplicate keys, and everything FindSpecProblems
// finds (at most kMaxSpecMessageBytes of lines, then how many more). Errors that stop the
// reading come alone: YAML or JSON syntax, more than one YAML document, a spec that is empty,
// not a mapping or too big, and a --set that is not PATH=VALUE or whose VALUE is not YAML.
StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& source,
                                   const std::vector<std::string>& sets = {});

// Reads and parses a spec file, with `sets` as in ParseJobSpec. Refuses, naming the path, a
// file that is missing, unreadable, not a regular file, or larger than kMaxSpecBytes.
StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path,
                                      const std::vector<std::string>& sets = {});

// `spec` with `sets` applied as ParseJobSpec applies them to a file, then validated: for a
// spec built without a file (`convoy submit -- CMD`). Errors as ParseJobSpec's, prefixed with
// `source` where no --set is to blame. code_sha256 is kept.
StatusOr<v1::JobSpec> OverrideJobSpec(const v1::JobSpec& spec, const std::vector<std::string>& sets,
                                      const std::string& source);

}  // namespace convoy

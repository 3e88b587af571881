// Parsing job specs from YAML or JSON (DESIGN.md "Job spec") into v1::JobSpec.
#pragma once

#include <cstddef>
#include <string>

#include "common/job_spec_validation.h"  // kMaxSpecBytes
#include "common/status.h"
#include "convoy/v1/common.pb.h"

namespace convoy {

// Parses a spec from YAML or JSON text (JSON when the first non-blank character is '{'; it
// is checked as strict JSON, then read like YAML, of which it is a subset). YAML keys are the
// proto field names, except: `procs_per_node: gpu` sets procs_per_node_gpu, `hang_timeout`
// (seconds) sets hang_timeout_s, `max_runtime` (seconds) sets max_runtime_s,
// `resize_interval` (seconds) sets resize_interval_s, and `memory_per_proc` (a size: `16Gi`,
// `512Mi`, `2G` or bytes) sets memory_per_proc_bytes. An absent `backend` becomes "gloo".
// `env` and `node_selector` values may be any scalar; they are kept as strings.
//
// On error returns INVALID_ARGUMENT, prefixed with `source` and, where the spot is known,
// its line and column, then the field path:
//   "job.yaml:7:15: trainer.batch_size: expected an integer, got 'abc'"
//   "job.yaml: name: is required"
// for unknown fields at any level, wrong types (quoted numbers and floats where integers
// are expected included), integer overflow, duplicate keys, more than one YAML document,
// syntax errors, and everything ValidateJobSpec refuses.
StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& source);

// Reads and parses a spec file. Refuses, naming the path, a file that is missing,
// unreadable, not a regular file, or larger than kMaxSpecBytes.
StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path);

}  // namespace convoy

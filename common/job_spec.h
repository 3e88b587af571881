// Parsing job specs from YAML or JSON (DESIGN.md "Job spec") into v1::JobSpec.
#pragma once

#include <string>

#include "common/status.h"
#include "convoy/v1/common.pb.h"

namespace convoy {

// Largest spec file accepted.
inline constexpr size_t kMaxSpecBytes = 1 << 20;

// Parses a spec from YAML or JSON text (JSON is YAML's subset). On error returns
// INVALID_ARGUMENT "<source>: <field>: <problem>" for unknown fields at any level, wrong
// types (quoted numbers included), duplicate keys, syntax errors (with line and column),
// and everything ValidateJobSpec refuses.
StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& source);

// Reads and parses a spec file; refuses missing, unreadable and oversized files by path.
StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path);

}  // namespace convoy

// Validation of job specs: free functions returning INVALID_ARGUMENT with a message that
// names the offending field ("trainer.batch_size: must be between 1 and 65536, got 0").
// Used by the CLI after parsing and by the coordinator on every SubmitJob (an RPC may
// bypass the CLI).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "convoy/v1/common.pb.h"

namespace convoy {

// Limits, with the reason for each.
inline constexpr int kMaxNodes = 16384;       // bench/scale: 10,000-node jobs on one coordinator
inline constexpr int kMaxProcsPerNode = 256;  // one process per core or GPU of a big box
inline constexpr int kMaxWorldSize = 65536;
inline constexpr int kMaxRestarts = 100;  // a job failing more often needs a person
inline constexpr int kMaxHangTimeoutS = 7 * 24 * 3600;
inline constexpr int kMaxPriority = 1000;
inline constexpr int64_t kMaxRuntimeS = 365LL * 24 * 3600;
inline constexpr size_t kMaxArgBytes = 64 * 1024;
inline constexpr int kMaxArgs = 4096;
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr size_t kMaxSpecBytes = 1 << 20;  // encoded JobSpec, as for a spec file

// OK when `spec` can be run; otherwise the first problem found, naming its field.
Status ValidateJobSpec(const v1::JobSpec& spec);

// True for environment names Convoy sets itself (RANK, MASTER_ADDR, TORCHELASTIC_*,
// CONVOY_*...), which a spec may not override.
bool IsReservedEnvName(const std::string& name);

// How messages name the env variable `key`: "env.KEY", with every byte outside
// [A-Za-z0-9_.-] written as \xNN and at most 256 bytes of it, so that a name such as
// "a: b" cannot break the "<field>: <reason>" shape of a message.
std::string EnvFieldName(const std::string& key);

}  // namespace convoy

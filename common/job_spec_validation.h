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
inline constexpr int kMaxGpusPerProc = 64;        // a whole big box for one process
inline constexpr int kMaxCpusPerProc = 4096;
inline constexpr int64_t kMaxMemoryPerProc = int64_t{1} << 50;  // 1 PiB
inline constexpr int kMaxResizeIntervalS = 7 * 24 * 3600;

// OK when `spec` can be run; otherwise the first problem found, naming its field.
Status ValidateJobSpec(const v1::JobSpec& spec);

// True for environment names Convoy sets itself (RANK, MASTER_ADDR, TORCHELASTIC_*,
// CONVOY_*...), which a spec may not override.
bool IsReservedEnvName(const std::string& name);

// How messages name the env variable `key`: "env.KEY", with every byte outside
// [A-Za-z0-9_.-] written as \xNN and at most 256 bytes of it, so that a name such as
// "a: b" cannot break the "<field>: <reason>" shape of a message.
std::string EnvFieldName(const std::string& key);
// The same for a key of another map field: "node_selector.zone".
std::string MapKeyFieldName(const std::string& map, const std::string& key);

// Whether `text` may be a worker label's key (1-253 bytes of [A-Za-z0-9._/-], starting with
// a letter or digit) or value (0-63 bytes of [A-Za-z0-9._-]), as Kubernetes labels; used for
// convoy-worker --label and a spec's node_selector.
bool IsValidLabelKey(const std::string& text);
bool IsValidLabelValue(const std::string& text);

// The node counts a spec may run at: [nodes, nodes], or [min_nodes, max_nodes] for an
// elastic job. Meaningful for a valid spec.
int MinNodes(const v1::JobSpec& spec);
int MaxNodes(const v1::JobSpec& spec);
inline bool IsElastic(const v1::JobSpec& spec) { return spec.max_nodes() > 0; }

}  // namespace convoy

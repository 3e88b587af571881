// Validation of job specs: free functions reporting every problem of a spec, each naming its
// field ("trainer.batch_size: must be between 1 and 65536, got 0"). Used by the CLI after
// parsing and by the coordinator on every SubmitJob (an RPC may bypass the CLI).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

// One problem of a spec: the field it concerns ("trainer.lr", "env.FOO", "command[2]", or
// "spec" for the whole) and why, e.g. {"trainer.lr", "must be greater than 0 and at most 1000,
// got 0"}.
struct SpecProblem {
  std::string field;
  std::string message;
};

// Whether the spec's text wrote a top-level field ("nodes", "procs_per_node"...).
using SpecFieldWritten = std::function<bool(const std::string& field)>;

// Every problem of `spec`, in the order of the spec's fields (empty when it can be run). A
// required field (name, nodes or min_nodes and max_nodes, procs_per_node, trainer or
// command) that is absent reads "missing (<what to give>)". With `written` (the parser's),
// absent means not written, and a field written as 0 gets its range's message; without it (a
// spec from an RPC, where proto3 cannot tell 0 from absent) a zero required field is missing.
std::vector<SpecProblem> FindSpecProblems(const v1::JobSpec& spec,
                                          const SpecFieldWritten& written = nullptr);

// The problems of the built-in trainer's part alone (fields "trainer.*"), as FindSpecProblems
// finds them: the one check of a TrainerSpec, run at submit (in FindSpecProblems) and by
// convoy-trainer on the spec it is given (spec/trainer_spec_env.h).
std::vector<SpecProblem> FindTrainerSpecProblems(const v1::TrainerSpec& trainer);

// Whether `resume_from` names a job ("j-" and digits, as the coordinator numbers them) rather
// than a path: the one rule the coordinator (which resolves a job) and the worker (which
// resolves a path under the job's directory) share.
bool IsJobIdLike(const std::string& resume_from);

// OK when `spec` can be run; otherwise INVALID_ARGUMENT with every problem of
// FindSpecProblems, one "<field>: <why>" a line, the first first (JoinSpecProblemLines).
Status ValidateJobSpec(const v1::JobSpec& spec);

// `lines` joined by '\n' as one bounded message: each with its control bytes written as
// \xNN (so that a newline in a quoted value cannot split it) and cut at kMaxSpecMessageBytes;
// the first line always, then those that fit in kMaxSpecMessageBytes in all (a coordinator
// returns the message in gRPC trailers, 8 KiB by default), then "<prefix>spec: N more
// problems not shown" for the rest.
inline constexpr size_t kMaxSpecMessageBytes = 4096;
std::string JoinSpecProblemLines(const std::vector<std::string>& lines, const std::string& prefix);

// OK when `problems` is empty; else INVALID_ARGUMENT with one "<prefix><field>: <why>" a line
// (JoinSpecProblemLines): ValidateJobSpec's message (prefix "") and the trainer's
// ("CONVOY_TRAINER_SPEC: ", spec/trainer_spec_env.h) alike.
Status SpecProblemsStatus(const std::vector<SpecProblem>& problems, const std::string& prefix);

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

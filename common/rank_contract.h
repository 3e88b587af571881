// The contract between the worker and the processes of a rank (convoy-trainer, a user's
// script through bench/ and examples' convoy_metrics.py): what the worker gives a rank and
// what a rank may expect to find, written once. Header-only, standard library only: the
// trainer includes it also when it is built on its own. examples/python/convoy_metrics.py
// spells the metric keys and the socket's variable the same
// (tests/unit/common_rank_contract_test.cc compares them).
#pragma once

#include <string>
#include <vector>

namespace convoy::rank_contract {

// ---- Environment: Convoy's own variables of every rank (DESIGN.md "Environment of every
// training process"), set by the worker (worker/exec/rank_env.h) and read by the trainer
// (trainer/options.h) or a user's script. CONVOY_TRAINER_SPEC, the trainer's spec, is the
// spec's own contract (spec/trainer_spec_variable.h).
inline constexpr const char* kJobIdEnv = "CONVOY_JOB_ID";
inline constexpr const char* kAttemptEnv = "CONVOY_ATTEMPT";
// The job's identity (Launch.job_uid, Launch.cluster_id); absent from an older coordinator.
inline constexpr const char* kJobUidEnv = "CONVOY_JOB_UID";
inline constexpr const char* kClusterIdEnv = "CONVOY_CLUSTER_ID";
// The largest WORLD_SIZE the job may run at (elastic jobs).
inline constexpr const char* kMaxWorldSizeEnv = "CONVOY_MAX_WORLD_SIZE";
// Where a rank writes its metric records (Metrics below): a Unix stream socket.
inline constexpr const char* kMetricsSocketEnv = "CONVOY_METRICS_SOCKET";
inline constexpr const char* kCheckpointDirEnv = "CONVOY_CHECKPOINT_DIR";
// Host memory for the trainer's snapshots; absent when the worker has none.
inline constexpr const char* kSnapshotDirEnv = "CONVOY_SNAPSHOT_DIR";
// A file the worker creates, holding the reason, just before a SIGTERM that means "save and
// stop" (a preemption); the trainer checks whether it exists.
inline constexpr const char* kPreemptFileEnv = "CONVOY_PREEMPT_FILE";
// spec.resume_from resolved on the worker, and the job uid whose state it holds.
inline constexpr const char* kResumeFromEnv = "CONVOY_RESUME_FROM";
inline constexpr const char* kResumeFromUidEnv = "CONVOY_RESUME_FROM_UID";
// The worker's data cache (common/data_cache.h), read-only for the ranks.
inline constexpr const char* kCacheDirEnv = "CONVOY_CACHE_DIR";

// ---- Metrics: one JSON object a line on the metrics socket. The worker parses the fields
// (worker/exec/metrics_parse.h) and keeps any other numeric key as a value; the CLI and the
// coordinator's /metrics read the values named here.
namespace metric {
// Fields of a record.
inline constexpr const char* kKind = "kind";  // a string: what the record is (kinds below)
inline constexpr const char* kStep = "step";
inline constexpr const char* kEpoch = "epoch";
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kSamples = "samples";  // samples trained so far, all ranks
inline constexpr const char* kSeconds = "seconds";  // since training began
inline constexpr const char* kRank = "rank";  // stamped by the worker; a rank's own must agree
// Values.
inline constexpr const char* kSamplesPerS = "samples_per_s";
inline constexpr const char* kTotalSteps = "total_steps";      // the steps the job will train
inline constexpr const char* kFirstStepS = "first_step_s";     // launch to the first step
inline constexpr const char* kTestAccuracy = "test_accuracy";  // 0..1
inline constexpr const char* kTestLoss = "test_loss";
// Kinds the built-in trainer writes.
inline constexpr const char* kKindStep = "step";
inline constexpr const char* kKindEval = "eval";
inline constexpr const char* kKindEpochCheck = "epoch_check";
inline constexpr const char* kKindHeartbeat = "heartbeat";  // liveness only, no progress
// A checkpoint is complete on disk (README "Checkpoints kept by policy"): the record's step
// and values (loss, test_accuracy, ...) mark it, and kCheckpointPath names it, relative to
// CONVOY_CHECKPOINT_DIR (a string; one path component). Written by the built-in trainer and
// by convoy_metrics.checkpoint(); the worker keeps or deletes it by the job's policy.
inline constexpr const char* kKindCheckpoint = "checkpoint";
inline constexpr const char* kCheckpointPath = "checkpoint_path";
}  // namespace metric

// ---- Checkpoints: the trainer writes `<checkpoint dir>/ckpt-<step, 12 digits>.pt` (through
// `<that>.tmp`, renamed when whole); the worker copies every such file of a resume_from job
// into the resuming job's own directory when their identities differ.
inline constexpr const char* kCheckpointPrefix = "ckpt-";
inline constexpr const char* kCheckpointSuffix = ".pt";
// Set ("1") when the job has a checkpoint policy (spec `checkpoint:`): the worker deletes
// what the policy drops, so the trainer keeps every checkpoint it writes rather than the two
// newest.
inline constexpr const char* kCheckpointPolicyEnv = "CONVOY_CHECKPOINT_POLICY";
// Whether `name` (a file name, no directory) is a whole checkpoint.
inline bool IsCheckpointName(const std::string& name) {
  const std::string prefix = kCheckpointPrefix, suffix = kCheckpointSuffix;
  return name.size() >= prefix.size() + suffix.size() &&
         name.compare(0, prefix.size(), prefix) == 0 &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---- Data
// convoy-trainer's data directory when its spec names none (Debian's dataset-fashion-mnist).
inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";
// The IDX files the built-in trainer reads from a data directory: the training and test
// images and labels of Fashion-MNIST. `split` "train" or "t10k", `kind` "images" or "labels".
inline std::string DataFile(const std::string& dir, const std::string& split,
                            const std::string& kind) {
  return dir + "/" + split + "-" + kind + (kind == "images" ? "-idx3" : "-idx1") + "-ubyte.gz";
}
// Every file of DataFile in `dir`: what the worker caches for a trainer job (common/data_cache.h).
inline std::vector<std::string> DataFiles(const std::string& dir) {
  return {DataFile(dir, "train", "images"), DataFile(dir, "train", "labels"),
          DataFile(dir, "t10k", "images"), DataFile(dir, "t10k", "labels")};
}

// ---- Metric records (the JSON lines a rank writes to CONVOY_METRICS_SOCKET)
// Bad steps (issue 42, trainer/bad_steps.h): a "step" record's count of the steps this attempt
// skipped so far because a loss or gradient norm was not finite on some rank; the record kind
// written when the ranks rewound to a good state after too many in a row, with the last bad
// step ("step"), the step of the state loaded (kMetricRewoundTo) and the attempt's rewinds.
inline constexpr const char* kMetricBadSteps = "bad_steps";
inline constexpr const char* kRecordRewind = "rewind";
inline constexpr const char* kMetricRewoundTo = "to_step";
inline constexpr const char* kMetricRewinds = "rewinds";

}  // namespace convoy::rank_contract

// Checkpoints kept by policy (README "Checkpoints kept by policy"): the worker keeps what a
// job's `checkpoint:` policy keeps of the checkpoints its ranks marked (a "checkpoint" metric
// record each: the trainer's, or convoy_metrics.checkpoint()), and deletes the rest.
//
// Per job (by its identity, JobDirName: every attempt of the job, and every run of the
// worker, shares it) a manifest, <work dir>/jobs/<JobDirName>/checkpoints.json, lists each
// checkpoint kept with its step, attempt, time and metrics, the policy, and the deletions
// under way. It lives in the worker's own directory of the job, not in the checkpoint
// directory: the ranks run as the job's identity and own that one, and must not be able to
// write the list of what a root worker deletes, nor plant a symlink where it writes.
// It is written atomically (a temporary file, fsync, rename, fsync of the directory).
//
// A deletion never leaves a half-deleted checkpoint where a reader looks:
//   1. intent: the manifest moves the victim from the kept list to `deleting` (written);
//   2. hide: the victim is renamed, in its directory, to ".convoy-deleting-<name>", a name
//      no reader takes (the trainer's scan wants ckpt-*.pt; a hidden name matches no glob);
//   3. remove: the hidden file or tree is removed (never following a symlink);
//   4. done: the manifest drops it from `deleting` (written).
// A worker killed anywhere in between finishes the deletion when it starts again
// (RecoverAll) or at the job's next record; each step is idempotent. A checkpoint is renamed
// whole or not at all, so a reader sees it complete or not at all.
//
// Threading: not thread-safe; the supervisor calls it on its files thread only (deletions
// take time: never on the loop that sends heartbeats).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/common.pb.h"
#include "convoy/v1/worker.pb.h"

namespace convoy {

// The manifest's file name in the worker's directory of the job.
inline constexpr const char* kCheckpointManifestName = "checkpoints.json";
// What a checkpoint being deleted is renamed to, before it is removed: "<prefix><name>".
inline constexpr const char* kDeletingPrefix = ".convoy-deleting-";

// Whether `path` (a record's checkpoint_path) may name a checkpoint: one path component of
// at most 255 bytes, not starting with '.' (no hidden, ".", ".." or deletion names).
bool IsKeepableCheckpointPath(const std::string& path);

// One checkpoint of the manifest.
struct KeptCheckpoint {
  std::string path;  // relative to the checkpoint directory: one component
  int64_t step = 0;
  int attempt = 0;
  int64_t saved_unix_ms = 0;
  int64_t order = 0;  // arrival, for ties of step
  std::map<std::string, double> metrics;
};

// A job's manifest.
struct CheckpointManifest {
  std::string job_id;
  std::string job_uid;
  std::string checkpoint_dir;  // absolute, canonical
  v1::CheckpointPolicy policy;
  int64_t next_order = 0;
  std::vector<KeptCheckpoint> kept;   // in order of arrival
  std::vector<std::string> deleting;  // names whose deletion is under way (step 1 done)
};

// The manifest as JSON text, and back (INVALID_ARGUMENT for text that is not one).
std::string ManifestToJson(const CheckpointManifest& m);
StatusOr<CheckpointManifest> ManifestFromJson(const std::string& text);

class CheckpointKeeper {
 public:
  // The steps of a deletion, for the test hook.
  enum class Step { kIntent, kHidden, kRemoved };
  // Called after each step of each victim's deletion (tests: a pause there, then SIGKILL).
  using StepHook = std::function<void(Step, const std::string& name)>;

  // `jobs_dir`: <work dir>/jobs, holding each job's directory (JobDirName). `worker`: this
  // worker's name (CheckpointInfo.worker).
  CheckpointKeeper(std::string jobs_dir, std::string worker);

  // What Record needs of the job.
  struct Job {
    std::string job_id;
    std::string job_uid;
    std::string checkpoint_dir;  // absolute, canonical (as resolved at launch)
    v1::CheckpointPolicy policy;
  };
  // A checkpoint record of attempt `attempt` of `job`: finishes any deletion under way, adds
  // the checkpoint to the manifest (or updates the one of that name: a checkpoint rewritten
  // at the same step, now with its evaluation), applies the policy and deletes what it drops.
  // Returns what the job keeps now (for CheckpointsKept). INVALID_ARGUMENT for a record that
  // names no checkpoint file of the directory (a bad path, a file that is not there):
  // nothing changes then. INTERNAL when the manifest cannot be written (nothing is deleted).
  StatusOr<v1::CheckpointsKept> Record(const Job& job, int attempt, const v1::MetricRecord& rec,
                                       int64_t now_unix_ms);
  // Every job with a manifest here: finishes the deletions an earlier run of the worker left
  // (killed mid-deletion), and returns what each keeps. Called when the worker starts and
  // after each registration (the coordinator replaces what it knew).
  std::vector<v1::CheckpointsKept> RecoverAll();

  // Tests only.
  void SetStepHook(StepHook hook) { hook_ = std::move(hook); }
  // The manifest path of a job.
  std::string ManifestPath(const std::string& job_id, const std::string& job_uid) const;

 private:
  // Steps 2-4 for every name in m.deleting; m is written when done.
  Status FinishDeletions(CheckpointManifest& m, const std::string& manifest_path);
  v1::CheckpointsKept Kept(const CheckpointManifest& m) const;

  const std::string jobs_dir_;
  const std::string worker_;
  StepHook hook_;
};

// Reads and writes a manifest file (the write atomic: temporary, fsync, rename, fsync of the
// directory). NOT_FOUND when there is none.
StatusOr<CheckpointManifest> ReadManifest(const std::string& path);
Status WriteManifest(const std::string& path, const CheckpointManifest& m);

}  // namespace convoy

// Host memory for the snapshots of the built-in trainer (README "Fast restarts"): a
// directory per job under the worker's snapshot root, passed to every rank as
// CONVOY_SNAPSHOT_DIR. The ranks of each host keep the newest copy of their model and
// optimiser state there, so that a restart resumes from it instead of the last checkpoint
// on disk. It outlives the job's attempts on this worker (that is its point), and goes when
// the coordinator says the job finished (JobFinished), when the job is deleted, or when no
// attempt of the job has run here for kSnapshotIdleMs.
//
// The root is a tmpfs (/dev/shm) when the host has one: the snapshots are memory, written
// and read at memory speed, and survive a rank's (not the host's) death.
//
// Threading: free functions, no shared state; the supervisor thread calls them.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/host/users.h"

namespace convoy {

// A job's snapshots are dropped this long after the last of its attempts here ended.
inline constexpr int64_t kSnapshotIdleMs = 3600 * 1000;

// /dev/shm/convoy-<worker name> when /dev/shm is a directory the worker can write, else
// <work_dir>/snapshots.
std::string DefaultSnapshotRoot(const std::string& worker_name, const std::string& work_dir);

// The name of a job's snapshot directory under the root: "<cluster id>-<job uid>" (each 32
// lower-case hex characters) when the launch has both, so that jobs of the same id of two
// clusters (ids restart at j-000001 on every fresh state directory) never share one; else
// (a launch from an older coordinator) the job id.
std::string SnapshotKey(const std::string& job_id, const std::string& cluster_id,
                        const std::string& job_uid);

// Whether `name` is one SnapshotKey makes: "<cluster id>-<job uid>", or a job id.
bool IsSnapshotKey(const std::string& name);

// The names under `root` that are snapshot keys, sorted (nothing when it does not exist).
std::vector<std::string> ListSnapshotKeys(const std::string& root);

// The bytes of the regular files directly in `dir` (a snapshot directory holds only those).
int64_t SnapshotDirBytes(const std::string& dir);

// Makes `root` (0711, the worker's; not a symlink) and `root`/`key` (0700, owned by
// `user`, else the worker's own user) and returns the latter. `key`: SnapshotKey's.
StatusOr<std::string> PrepareSnapshotDir(const std::string& root, const std::string& key,
                                         const std::optional<RunAsUser>& user);

// Removes `root`/`key` and what is in it (never following a symlink). Missing is no error.
Status RemoveSnapshotDir(const std::string& root, const std::string& key);

// Removes the job directories under `root` whose newest entry is older than `idle_ms`
// (by modification time, wall clock), except those named in `keep` (the keys of attempts
// that run or ended within idle_ms). Returns the keys removed.
std::set<std::string> ExpireSnapshotDirs(const std::string& root, int64_t idle_ms,
                                         const std::set<std::string>& keep);

}  // namespace convoy

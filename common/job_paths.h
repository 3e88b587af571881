// Where a job's files may live on a worker (issue 12, "Jobs run as an unprivileged user").
//
// Every job has its own directory `<job root>/<job id>`, created by the worker and owned by
// the user its ranks run as. The spec's `checkpoint_dir`, `working_dir` and
// `trainer.data_dir` are resolved against it (a relative path is relative to the job's
// directory), symlinks included, and must then lie under the job root (`data_dir` may also
// lie under one of the read-only data roots). The submit-time check in
// job_spec_validation.cc refuses `..` components; this is the check that can only be made
// on the worker, whose file system it is.
//
// Threading: free functions without shared state; any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace convoy {

// True when `path` has a `..` component ("a/../b", "..", "/x/.."; not "a..b").
bool HasDotDotComponent(const std::string& path);

// Whether `path` is `root` or lies below it. Both absolute and lexically normal (as
// weakly_canonical returns them); "/a/bc" is not under "/a/b".
bool IsPathUnder(const std::string& path, const std::string& root);

// Creates `dir` (and its parents) when missing, mode 0711 for those it creates (others
// must be able to reach the job directories below it), and returns its canonical absolute
// form (symlinks resolved, no trailing slash). An error, naming `flag` ("--job-root"), when
// it cannot be made or this process cannot create directories in it.
StatusOr<std::string> PrepareRoot(const std::string& flag, const std::string& dir);

// The canonical absolute form of `dir` (symlinks resolved as far as it exists).
StatusOr<std::string> CanonicalPath(const std::string& dir);

// Resolves a spec path for the job whose directory is `job_dir` (absolute, lexically
// normal): a relative `value` is taken relative to `job_dir`, then symlinks are resolved
// (std::filesystem::weakly_canonical: the part that exists is followed, the rest kept).
// Returns the resolved path when it lies under `job_root` or one of `extra_roots` (both
// canonical, as PrepareRoot returns them). Otherwise an InvalidArgument that names
// `field`, e.g. "checkpoint_dir: /var/lib/convoy/jobs/j1/out resolves to /etc, outside the
// job root /var/lib/convoy/jobs". `value` must not be empty.
// `root_name` names `job_root` in the message ("the job root", "the job's directory").
StatusOr<std::string> ResolveJobPath(const std::string& field, const std::string& value,
                                     const std::string& job_dir, const std::string& job_root,
                                     const std::vector<std::string>& extra_roots = {},
                                     const std::string& root_name = "the job root");

// Creates the directory `path` (canonical, under the canonical `root`) and the missing ones
// between, walking down from `root` without ever following a symlink (a component that is
// one fails: a job's user cannot redirect the worker's mkdir or chown elsewhere). Each
// directory it creates gets `mode` and, when `uid` >= 0, the owner `uid`:`gid`; ones that
// existed are left as they are. Returns what failed, naming the directory.
Status MakeJobDirs(const std::string& root, const std::string& path, int64_t uid, int64_t gid,
                   mode_t mode);

// Where one job's files go on this worker, every path canonical.
// The name of a job's directories, under the job root and the worker's WORK/jobs, and of its
// metrics socket: "<job id>-<job uid>" (the uid: 32 lower-case hex digits), so that the
// job of the same id of another cluster, or of this one after a fresh state directory (ids
// restart at j-000001), never shares them; the job id alone when `job_uid` is not one (a
// launch from a coordinator older than uids).
std::string JobDirName(const std::string& job_id, const std::string& job_uid);

struct JobDirs {
  std::string job_dir;         // <job root>/<JobDirName>
  std::string checkpoint_dir;  // default: <job dir>/checkpoints
  std::string working_dir;     // default: the job dir
  std::string data_dir;        // empty: the trainer's default
};

// Resolves the spec's paths (the arguments named after the spec's fields, empty when not
// set) with ResolveJobPath: `checkpoint_dir` and `working_dir` under the job's own directory
// or one of `shared_paths` (--shared-path: a job never writes into another job's directory),
// `data_dir` under the job root or one of `data_paths`; then creates the job directory and
// the checkpoint directory with MakeJobDirs (mode 0700, owner `uid`:`gid` when `uid` >= 0).
// Nothing is created when a path is refused. `job_id` (JobDirName's, the
// directory's name) must be a valid name (no '/'). Errors name the field ("checkpoint_dir: ...").
StatusOr<JobDirs> PrepareJobDirs(const std::string& job_root,
                                 const std::vector<std::string>& data_paths,
                                 const std::string& job_id, const std::string& checkpoint_dir,
                                 const std::string& working_dir, const std::string& data_dir,
                                 int64_t uid, int64_t gid,
                                 const std::vector<std::string>& shared_paths = {});

// Empty when the user `uid`:`gid` (no supplementary groups) may search every directory
// from "/" down to `path` (inclusive); else the first one it may not, with its owner and
// mode ("/tmp/x (owner 0, mode 0700)"). For warnings at start: a rank that cannot reach
// its job directory or metrics socket fails in ways that are hard to read later.
std::string FirstUnsearchableDir(const std::string& path, uid_t uid, gid_t gid);

}  // namespace convoy

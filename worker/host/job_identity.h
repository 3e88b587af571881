// An identity per job (issue 27): a root worker runs each job's ranks as a uid and gid of
// their own, drawn from a pool it owns (`--run-as-pool 61184-65519`, the range systemd's
// DynamicUser draws from), as DynamicUser does. A job's identity owns its job directory,
// checkpoints, unpacked code, metrics socket, snapshot directory, error files and rank logs,
// and nothing else; no other job and no daemon has it.
//
// Which uid: the coordinator numbers each job's identity (Job.identity, carried by Launch:
// uid = FIRST + number - 1), so a job has the same uid on every worker (a job root shared
// between workers has one owner per job); a launch from an older coordinator gets a uid this
// worker picks. Records: `<dir>/<uid>` holds the name of the job's directories (JobDirName:
// id and uid, so never another cluster's job of the same id), made with O_EXCL, so a worker
// restart keeps every job's identity and a uid this worker still holds for a job whose files
// are not deleted is never given to another. A job keeps its identity across its attempts
// until its files are deleted (`convoy delete`, retention), when it is released, and what
// its uid still owns at the top of /tmp, /var/tmp and /dev/shm is removed (files a job left
// outside its directories would otherwise reach the next job given that uid).
//
// Threading: not thread-safe; the supervisor thread (and main, before it starts) only.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/host/users.h"

namespace convoy {

struct UidRange {
  uid_t first = 0;
  uid_t last = 0;
  size_t size() const { return static_cast<size_t>(last - first) + 1; }
};

// "FIRST-LAST" (both inclusive, 1000 <= FIRST <= LAST < 2^31-1). INVALID_ARGUMENT naming
// `flag` otherwise.
StatusOr<UidRange> ParseUidRange(const std::string& flag, const std::string& text);

// A user that stands for every job identity of `pool` in the checks of what ranks can reach
// (each is only "another user" to the worker's directories): its first uid and gid.
inline RunAsUser PoolRepresentative(const UidRange& pool) {
  return RunAsUser{pool.first, pool.first, "a job identity of --run-as-pool", ""};
}
// The same for --run-as owner: an account that is not the worker's (nobody's uid and gid).
inline RunAsUser OwnerRepresentative() {
  return RunAsUser{65534, 65534, "a job owner's account", ""};
}

// OK when no account of the password database has a uid in `range` and no group of the group
// database a gid in it; else FAILED_PRECONDITION naming the first such account or group and
// `flag` (the pool would hand out an identity that is someone's).
Status CheckRangeFree(const std::string& flag, const UidRange& range);

// Where a job's uid may leave files outside its directories, removed when its identity is
// released.
inline std::vector<std::string> UidTmpDirs() { return {"/tmp", "/var/tmp", "/dev/shm"}; }

class JobIdentities {
 public:
  // Reads the records in `dir` (made 0700 when missing); ALREADY_EXISTS-free: a record of a
  // uid outside `range` or an unreadable one is dropped with a warning.
  static StatusOr<std::unique_ptr<JobIdentities>> Open(const std::string& dir, UidRange range);

  // The identity of the job whose directories are named `job` (uid = gid; name
  // "convoy-job-UID"; HOME `home`). `number` > 0 (Launch.identity, the coordinator's, the
  // same on every worker): uid FIRST + number - 1, refused when beyond the pool, when an
  // account or group has it, or when this worker still holds it for another job (whose
  // files are not deleted yet). `number` 0 (an older coordinator): its recorded one, else a
  // new uid from the pool that no record, account, group or running process has
  // (RESOURCE_EXHAUSTED when the pool is used up).
  // `cluster` (Launch.cluster_id) is recorded with it: a uid held for a job of another
  // cluster (this worker served another coordinator before; that cluster will never delete
  // the job's files here) is ALREADY_EXISTS with that job's directory name as the message,
  // for the caller to remove its files and Release it.
  StatusOr<RunAsUser> For(const std::string& job, const std::string& home, int32_t number = 0,
                          const std::string& cluster = "");
  // The uid recorded for `job`, if any.
  std::optional<uid_t> Find(const std::string& job) const;
  // Forgets `job`'s identity and removes what its uid still owns at the top of `tmp_dirs`
  // (RemoveFilesOfUid; none: the caller did, off the supervisor thread). Returns the uid it
  // had.
  std::optional<uid_t> Release(const std::string& job,
                               const std::vector<std::string>& tmp_dirs = UidTmpDirs());
  // Every job with an identity here.
  std::vector<std::string> Jobs() const;
  const UidRange& range() const { return range_; }

 private:
  JobIdentities(std::string dir, UidRange range) : dir_(std::move(dir)), range_(range) {}
  bool Taken(uid_t uid) const;
  Status Record(const std::string& job, uid_t uid, const std::string& cluster);

  const std::string dir_;
  const UidRange range_;
  std::map<std::string, uid_t> by_job_;
  std::map<uid_t, std::string> by_uid_;
  std::map<uid_t, std::string> cluster_of_;  // "" when unknown
  uid_t next_ = 0;                           // where the next search starts
};

// Removes what `uid` (job `job`'s identity, for the log) owns at the top of `tmp_dirs`: the
// slow part of a release (a tree a job left in /tmp), which the supervisor runs off its loop
// before it calls Release with no directories. Any thread.
void RemoveFilesOfUid(const std::string& job, uid_t uid,
                      const std::vector<std::string>& tmp_dirs = UidTmpDirs());

// --run-as pool on a root worker: `pool_text` (--run-as-pool) parsed and checked free, and
// the records in `<work_dir>/identities`. The error names the flag.
StatusOr<std::shared_ptr<JobIdentities>> PrepareJobIdentities(const std::string& pool_text,
                                                              const std::string& work_dir);

}  // namespace convoy

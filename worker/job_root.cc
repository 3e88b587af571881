#include "worker/job_root.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "common/job_paths.h"

namespace convoy {

StatusOr<std::string> StartupJobRoot(const std::string& flag_value, const std::string& work_dir,
                                     const std::string& snapshot_root,
                                     const std::optional<RunAsUser>& run_as, bool create) {
  const std::string wanted = flag_value.empty() ? work_dir + "/job-root" : flag_value;
  auto root = create ? PrepareRoot("--job-root", wanted) : CanonicalPath(wanted);
  if (!root.ok()) {
    if (create) return root.status();
    return Status::InvalidArgument("--job-root " + root.status().message());
  }
  std::vector<std::string> own = WorkerOwnDirs(work_dir);
  if (!snapshot_root.empty()) {
    auto snapshots = CanonicalPath(snapshot_root);
    own.push_back(snapshots.ok() ? *snapshots : snapshot_root);
  }
  CONVOY_RETURN_IF_ERROR(CheckJobRootApart(*root, work_dir, own));
  const uid_t uid = run_as ? run_as->uid : geteuid();
  const gid_t gid = run_as ? run_as->gid : getegid();
  CONVOY_RETURN_IF_ERROR(CheckReachable("--job-root", *root, uid, gid));
  // The way to the worker's own directory too (each rank's metrics socket is in <work
  // dir>/run); the worker makes the directory itself searchable when it starts.
  const std::string parent = std::filesystem::path(work_dir).parent_path().string();
  if (Status s = CheckReachable("--work-dir", parent, uid, gid); !s.ok()) {
    return Status::InvalidArgument("--work-dir " + work_dir + ": ranks (uid " +
                                   std::to_string(uid) +
                                   ") cannot reach it: " + FirstUnsearchableDir(parent, uid, gid) +
                                   " is not searchable for them; choose a directory they can "
                                   "reach, or make it searchable (chmod o+x)");
  }
  return *root;
}

}  // namespace convoy

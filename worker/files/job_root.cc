#include "worker/files/job_root.h"

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
  CONVOY_RETURN_IF_ERROR(CheckJobRootForRanks(*root, work_dir, run_as));
  if (!snapshot_root.empty()) {
    auto snapshots = CanonicalPath(snapshot_root);
    const std::string s = snapshots.ok() ? *snapshots : snapshot_root;
    if (IsPathUnder(*root, s) || IsPathUnder(s, *root)) {
      return Status::InvalidArgument("--job-root " + *root +
                                     ": overlaps the snapshot directory --snapshot-dir " + s +
                                     " (job directories would mix with the worker's files); "
                                     "choose a job root apart from it, e.g. " +
                                     work_dir + "/job-root");
    }
  }
  // The way to the snapshot directory (the worker makes it, 0711, and each job's below it: a
  // rank that cannot reach them writes no snapshots at all; the soak found e2e clusters whose
  // snapshots were silently off so) and to the worker's own directory (each rank's metrics
  // socket is in <work dir>/run; the worker makes the directory itself searchable).
  const uid_t uid = run_as ? run_as->uid : geteuid();
  const gid_t gid = run_as ? run_as->gid : getegid();
  const std::string who = run_as ? "user " + run_as->name + ", uid " + std::to_string(uid)
                                 : "uid " + std::to_string(uid);
  struct Way {
    std::string flag, dir, what;
  };
  std::vector<Way> ways;
  if (!snapshot_root.empty()) {
    ways.push_back({"--snapshot-dir", snapshot_root,
                    " is not searchable for them (their snapshots would be off); choose a "
                    "directory they can reach, or make that one searchable (chmod o+x)"});
  }
  ways.push_back({"--work-dir", work_dir,
                  " is not searchable for them; choose a work dir they can reach, or make that "
                  "directory searchable (chmod o+x)"});
  for (const Way& w : ways) {
    const std::string above = std::filesystem::path(w.dir).parent_path().string();
    const std::string bad = FirstUnsearchableDir(above, uid, gid);
    if (!bad.empty()) {
      return Status::InvalidArgument(w.flag + " " + w.dir + ": the ranks (" + who +
                                     ") cannot reach it: " + bad + w.what);
    }
  }
  return *root;
}

Status CheckJobRootForRanks(const std::string& job_root, const std::string& work_dir,
                            const std::optional<RunAsUser>& run_as) {
  auto root = CanonicalPath(job_root);
  if (!root.ok()) return Status::InvalidArgument("--job-root " + root.status().message());
  auto work = CanonicalPath(work_dir);
  if (!work.ok()) return Status::InvalidArgument("--work-dir " + work.status().message());
  const std::string shown = "--job-root " + job_root;
  if (IsPathUnder(*work, *root)) {
    return Status::InvalidArgument(
        shown + ": holds the worker's own directory --work-dir " + work_dir +
        " (job directories would contain the worker's files); choose a job root apart from it, "
        "e.g. " +
        *work + "/job-root");
  }
  for (const char* sub : {"jobs", "run", "code", "tls", "data-cache", "snapshots"}) {
    const std::string own = *work + "/" + sub;
    if (IsPathUnder(*root, own)) {
      return Status::InvalidArgument(
          shown + (*root == own ? ": is" : ": lies in") + " the worker's own directory " + own +
          " (job directories would mix with the worker's files); choose a job root apart from "
          "it, e.g. " +
          *work + "/job-root");
    }
  }
  const uid_t uid = run_as ? run_as->uid : geteuid();
  const gid_t gid = run_as ? run_as->gid : getegid();
  const std::string bad = FirstUnsearchableDir(*root, uid, gid);
  if (!bad.empty()) {
    const std::string who = run_as ? "user " + run_as->name + ", uid " + std::to_string(uid)
                                   : "uid " + std::to_string(uid);
    return Status::InvalidArgument(shown + ": the ranks (" + who + ") cannot reach it: " + bad +
                                   " is not searchable for them; choose a job root they can "
                                   "reach, or make that directory searchable (chmod o+x)");
  }
  return Status::Ok();
}

}  // namespace convoy

#include "worker/supervise/file_cleanup.h"

#include <dirent.h>
#include <spdlog/spdlog.h>

#include "common/job_paths.h"
#include "common/util.h"
#include "worker/files/file_removal.h"
#include "worker/files/snapshot_dir.h"

namespace convoy {

FileCleanup::FileCleanup(const WorkerConfig& config, AttemptTable& table, Reporter& reporter,
                         OffLoop& files_thread, ToLoop to_loop)
    : config_(config),
      table_(table),
      reporter_(reporter),
      files_thread_(files_thread),
      to_loop_(std::move(to_loop)) {}

void FileCleanup::DeleteJobFiles(const v1::DeleteJobFiles& req) {
  const std::string& id = req.job_id();
  if (!IsValidName(id) || id == "." || id == "..") {
    v1::WorkerMessage out;
    out.mutable_job_files_deleted()->set_job_id(id);
    out.mutable_job_files_deleted()->set_error("invalid job id '" + id + "'");
    reporter_.Send(out);
    return;
  }
  if (!deleting_.insert({id, req.job_uid()}).second) return;  // the one under way answers
  Deletion d;
  d.id = id;
  d.uid = req.job_uid();
  // Its directories' name (JobDirName): by its uid, so that the same id of another cluster
  // is never touched.
  d.name = JobDirName(id, req.job_uid());
  // An attempt that still runs keeps its directory, and the job its own: the coordinator
  // asks again later (it deletes only finished jobs: this is a worker that came back with
  // ranks the coordinator has just told it to kill).
  for (auto& [key, a] : table_.attempts()) {
    if (!AttemptTable::SameJob(key, id, req.job_uid())) continue;
    if (a.AnyRunning()) {
      d.keep.insert("attempt-" + std::to_string(key.attempt));
    } else {
      a.forgotten = true;  // nothing to report of it any more (the loop drops it)
      table_.Changed();
    }
  }
  if (d.keep.empty() && !config_.snapshot_root.empty()) {
    d.snapshots = table_.SnapshotKeysOf(id, req.job_uid());
    // By its identity too: a worker that restarted since the job ran here has no attempt
    // of it to name the directory.
    d.snapshots.insert(SnapshotKey(id, req.cluster_id(), req.job_uid()));
  }
  if (d.keep.empty() && config_.identities != nullptr) {
    d.identity = config_.identities->Find(d.name);
  }
  files_thread_.Run([this, d] { Remove(d); });
}

void FileCleanup::Remove(const Deletion& d) {
  const std::string attempts_dir = config_.work_dir + "/jobs";
  std::string error;
  int64_t removed = 0;
  for (const std::string& snapshot_key : d.snapshots) {
    Status st = RemoveSnapshotDir(config_.snapshot_root, snapshot_key);
    if (!st.ok() && error.empty()) error = st.message();
  }
  if (d.keep.empty()) {
    for (const std::string& root : {attempts_dir, config_.job_root}) {
      int64_t n = 0;
      Status st = RemoveUnder(root, d.name, &n);
      removed += n;
      if (!st.ok() && error.empty()) error = st.message();
    }
    // Its files are gone: so is what its uid left in /tmp, /var/tmp and /dev/shm (the uid
    // is released on the loop next, and handed out again later).
    if (error.empty() && d.identity) RemoveFilesOfUid(d.name, *d.identity);
  } else {
    // Only the finished attempts' directories go now.
    const std::string job_dir = attempts_dir + "/" + d.name;
    std::vector<std::string> names;
    if (DIR* dir = opendir(job_dir.c_str())) {
      while (dirent* e = readdir(dir)) {
        const std::string entry = e->d_name;
        if (entry != "." && entry != ".." && d.keep.count(entry) == 0) names.push_back(entry);
      }
      closedir(dir);
    }
    for (const std::string& entry : names) {
      int64_t n = 0;
      Status st = RemoveUnder(job_dir, entry, &n);
      removed += n;
      if (!st.ok() && error.empty()) error = st.message();
    }
  }
  to_loop_([this, d, removed, error] { Removed(d, removed, error); });
}

void FileCleanup::Removed(const Deletion& d, int64_t removed, const std::string& error_in) {
  deleting_.erase({d.id, d.uid});
  std::string error = error_in;
  if (!d.keep.empty()) {
    std::string running;
    for (const std::string& k : d.keep) running += (running.empty() ? "" : ", ") + k;
    error = "still running: " + running + (error.empty() ? "" : "; " + error);
  }
  if (error.empty() && d.keep.empty() && config_.identities != nullptr) {
    // Its files are gone: so is its identity here.
    if (auto uid = config_.identities->Release(d.name, {})) {
      spdlog::info("job {}: its identity (uid {}) is released", d.id, *uid);
    }
  }
  if (error.empty()) {
    spdlog::info("job {} was deleted: removed its files ({} entries) from {} and {}", d.id, removed,
                 config_.work_dir + "/jobs/" + d.name, config_.job_root + "/" + d.name);
  } else {
    spdlog::warn("job {} was deleted: files left for now: {}", d.id, error);
  }
  v1::WorkerMessage out;
  out.mutable_job_files_deleted()->set_job_id(d.id);
  out.mutable_job_files_deleted()->set_error(error);
  reporter_.Send(out);
}

void FileCleanup::JobFinished(const v1::JobFinished& req) {
  if (config_.snapshot_root.empty() || !IsValidName(req.job_id())) return;
  std::set<std::string>& keys = finished_with_snapshots_[req.job_id()];
  for (const std::string& k : table_.SnapshotKeysOf(req.job_id(), req.job_uid())) keys.insert(k);
  keys.insert(SnapshotKey(req.job_id(), req.cluster_id(), req.job_uid()));
  RemoveFinishedJobsSnapshots();
}

void FileCleanup::RemoveFinishedJobsSnapshots() {
  for (auto it = finished_with_snapshots_.begin(); it != finished_with_snapshots_.end();) {
    bool running = false;
    for (const auto& [key, a] : table_.attempts()) {
      running = running || (it->second.count(a.snapshot_key) > 0 && a.AnyRunning());
    }
    if (running) {
      ++it;
      continue;
    }
    files_thread_.Run([root = config_.snapshot_root, job = it->first, keys = it->second] {
      for (const std::string& snapshot_key : keys) {
        Status st = RemoveSnapshotDir(root, snapshot_key);
        if (!st.ok()) {
          spdlog::warn("job {} finished: its snapshots stay for now: {}", job, st.message());
        }
      }
    });
    it = finished_with_snapshots_.erase(it);
  }
}

void FileCleanup::RemoveStaleSnapshots(const std::vector<std::string>& keys) {
  if (config_.snapshot_root.empty() || keys.empty()) return;
  std::set<std::string> in_use;
  for (const auto& [key, a] : table_.attempts()) {
    if (a.AnyRunning()) in_use.insert(a.snapshot_key);
  }
  std::vector<std::string> stale;
  for (const std::string& key : keys) {
    if (in_use.count(key) == 0 && IsSnapshotKey(key)) stale.push_back(key);
  }
  if (stale.empty()) return;
  files_thread_.Run([root = config_.snapshot_root, stale] {
    int removed = 0;
    int64_t bytes = 0;
    for (const std::string& key : stale) {
      const int64_t size = SnapshotDirBytes(root + "/" + key);
      Status st = RemoveSnapshotDir(root, key);
      if (!st.ok()) {
        spdlog::warn("snapshots {}: not removed: {}", key, st.message());
        continue;
      }
      ++removed;
      bytes += size;
    }
    if (removed > 0) {
      spdlog::info(
          "removed the snapshots of {} job(s) that no running job of this cluster owns from {}: "
          "{:.1f} MiB freed",
          removed, root, static_cast<double>(bytes) / (1 << 20));
    }
  });
}

void FileCleanup::Tick(int64_t now_ms) {
  if (!finished_with_snapshots_.empty()) RemoveFinishedJobsSnapshots();
  if (config_.snapshot_root.empty() || now_ms < next_expiry_ms_) return;
  next_expiry_ms_ = now_ms + 60 * 1000;
  std::set<std::string> keep;
  for (const auto& [key, a] : table_.attempts()) {
    if (a.AnyRunning() || a.ended_ms == 0 || now_ms - a.ended_ms < kSnapshotIdleMs) {
      keep.insert(key.job_id);
      keep.insert(a.snapshot_key);
    }
  }
  for (const std::string& job : ExpireSnapshotDirs(config_.snapshot_root, kSnapshotIdleMs, keep)) {
    spdlog::info("job {}: its snapshots were removed: no attempt of it ran here for {} min", job,
                 kSnapshotIdleMs / 60000);
  }
}

}  // namespace convoy

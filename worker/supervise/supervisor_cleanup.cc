// The supervisor's removal of a deleted job's files (DeleteJobFiles from the coordinator).
// Threading as in supervisor.h: runs on the supervisor thread, which owns `attempts_`.
#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <set>

#include "common/job_paths.h"
#include "common/util.h"
#include "worker/files/file_removal.h"
#include "worker/files/snapshot_dir.h"
#include "worker/supervise/supervisor.h"

namespace convoy {

void Supervisor::DeleteJobFiles(const v1::DeleteJobFiles& req) {
  const std::string& id = req.job_id();
  v1::WorkerMessage out;
  v1::JobFilesDeleted* answer = out.mutable_job_files_deleted();
  answer->set_job_id(id);
  if (!IsValidName(id) || id == "." || id == "..") {
    answer->set_error("invalid job id '" + id + "'");
    Send(out);
    return;
  }
  // An attempt that still runs keeps its directory, and the job its own: the coordinator
  // asks again later (it deletes only finished jobs: this is a worker that came back with
  // ranks the coordinator has just told it to kill).
  std::set<std::string> keep;
  for (auto& [key, a] : attempts_) {
    if (!SameJob(key, id, req.job_uid())) continue;
    if (a.AnyRunning()) {
      keep.insert("attempt-" + std::to_string(key.attempt));
    } else {
      a.forgotten = true;  // nothing to report of it any more (Timers drops it)
      snapshot_dirty_ = true;
    }
  }
  const std::string attempts_dir = config_.work_dir + "/jobs";
  // Its directories' name (JobDirName): by its uid, so that the same id of another cluster
  // is never touched.
  const std::string name = JobDirName(id, req.job_uid());
  std::string error;
  int64_t removed = 0;
  if (keep.empty()) {
    if (!config_.snapshot_root.empty()) {
      std::set<std::string> keys = SnapshotKeysOf(id, req.job_uid());
      // By its identity too: a worker that restarted since the job ran here has no attempt
      // of it to name the directory.
      keys.insert(SnapshotKey(id, req.cluster_id(), req.job_uid()));
      for (const std::string& snapshot_key : keys) {
        Status st = RemoveSnapshotDir(config_.snapshot_root, snapshot_key);
        if (!st.ok() && error.empty()) error = st.message();
      }
    }
    for (const std::string& root : {attempts_dir, config_.job_root}) {
      int64_t n = 0;
      Status st = RemoveUnder(root, name, &n);
      removed += n;
      if (!st.ok() && error.empty()) error = st.message();
    }
  } else {
    // Only the finished attempts' directories go now.
    const std::string job_dir = attempts_dir + "/" + name;
    std::vector<std::string> names;
    if (DIR* d = opendir(job_dir.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string entry = e->d_name;
        if (entry != "." && entry != ".." && keep.count(entry) == 0) names.push_back(entry);
      }
      closedir(d);
    }
    for (const std::string& entry : names) {
      int64_t n = 0;
      Status st = RemoveUnder(job_dir, entry, &n);
      removed += n;
      if (!st.ok() && error.empty()) error = st.message();
    }
    std::string running;
    for (const std::string& k : keep) running += (running.empty() ? "" : ", ") + k;
    error = "still running: " + running + (error.empty() ? "" : "; " + error);
  }
  if (error.empty() && keep.empty() && config_.identities != nullptr) {
    // Its files are gone: so is its identity here, with what that uid left in /tmp,
    // /var/tmp and /dev/shm (the uid is handed out again later).
    if (auto uid = config_.identities->Release(name)) {
      spdlog::info("job {}: its identity (uid {}) is released", id, *uid);
    }
  }
  if (error.empty()) {
    spdlog::info("job {} was deleted: removed its files ({} entries) from {} and {}", id, removed,
                 attempts_dir + "/" + name, config_.job_root + "/" + name);
  } else {
    spdlog::warn("job {} was deleted: files left for now: {}", id, error);
  }
  answer->set_error(error);
  Send(out);
}

void Supervisor::JobFinished(const v1::JobFinished& req) {
  if (config_.snapshot_root.empty() || !IsValidName(req.job_id())) return;
  std::set<std::string>& keys = finished_jobs_with_snapshots_[req.job_id()];
  for (const std::string& k : SnapshotKeysOf(req.job_id(), req.job_uid())) keys.insert(k);
  keys.insert(SnapshotKey(req.job_id(), req.cluster_id(), req.job_uid()));
  RemoveFinishedJobsSnapshots();
}

void Supervisor::RemoveStaleSnapshots(const std::vector<std::string>& keys) {
  if (config_.snapshot_root.empty() || keys.empty()) return;
  std::set<std::string> in_use;
  for (const auto& [key, a] : attempts_) {
    if (a.AnyRunning()) in_use.insert(a.snapshot_key);
  }
  int removed = 0;
  int64_t bytes = 0;
  for (const std::string& key : keys) {
    if (in_use.count(key) > 0 || !IsSnapshotKey(key)) continue;
    const int64_t size = SnapshotDirBytes(config_.snapshot_root + "/" + key);
    Status st = RemoveSnapshotDir(config_.snapshot_root, key);
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
        removed, config_.snapshot_root, static_cast<double>(bytes) / (1 << 20));
  }
}

std::set<std::string> Supervisor::SnapshotKeysOf(const std::string& id,
                                                 const std::string& uid) const {
  std::set<std::string> keys;
  for (const auto& [key, a] : attempts_) {
    if (SameJob(key, id, uid) && !a.snapshot_key.empty()) keys.insert(a.snapshot_key);
  }
  return keys;
}

void Supervisor::RemoveFinishedJobsSnapshots() {
  for (auto it = finished_jobs_with_snapshots_.begin();
       it != finished_jobs_with_snapshots_.end();) {
    bool running = false;
    for (const auto& [key, a] : attempts_)
      running = running || (it->second.count(a.snapshot_key) > 0 && a.AnyRunning());
    if (running) {
      ++it;
      continue;
    }
    for (const std::string& snapshot_key : it->second) {
      Status st = RemoveSnapshotDir(config_.snapshot_root, snapshot_key);
      if (!st.ok()) {
        spdlog::warn("job {} finished: its snapshots stay for now: {}", it->first, st.message());
      }
    }
    it = finished_jobs_with_snapshots_.erase(it);
  }
}

void Supervisor::WritePreemptFile(const Attempt& a, const std::string& reason) {
  // In the attempt's directory (0711, the worker's): the ranks may read it, not make it. It
  // is the ranks' own and private like their other files there.
  const std::string path = a.dir + "/preempt";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::warn("job {} attempt {}: cannot write {}: {}", a.job_id, a.attempt, path,
                 std::strerror(errno));
    return;
  }
  const std::string text = (reason.empty() ? std::string("preempted") : reason) + "\n";
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (a.user && fchown(fd, a.user->uid, a.user->gid) != 0) ok = false;
  close(fd);
  if (!ok) spdlog::warn("job {} attempt {}: {} is incomplete", a.job_id, a.attempt, path);
}

void Supervisor::ExpireSnapshots(int64_t now_ms) {
  if (config_.snapshot_root.empty() || now_ms < next_snapshot_expiry_ms_) return;
  next_snapshot_expiry_ms_ = now_ms + 60 * 1000;
  std::set<std::string> keep;
  for (const auto& [key, a] : attempts_) {
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

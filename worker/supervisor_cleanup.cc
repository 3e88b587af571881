// The supervisor's removal of a deleted job's files (DeleteJobFiles from the coordinator).
// Threading as in supervisor.h: runs on the supervisor thread, which owns `attempts_`.
#include <dirent.h>
#include <spdlog/spdlog.h>

#include <set>

#include "common/util.h"
#include "worker/file_removal.h"
#include "worker/supervisor.h"

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
    if (key.first != id) continue;
    if (a.AnyRunning()) {
      keep.insert("attempt-" + std::to_string(key.second));
    } else {
      a.forgotten = true;  // nothing to report of it any more (Timers drops it)
      snapshot_dirty_ = true;
    }
  }
  const std::string attempts_dir = config_.work_dir + "/jobs";
  std::string error;
  int64_t removed = 0;
  if (keep.empty()) {
    for (const std::string& root : {attempts_dir, config_.job_root}) {
      int64_t n = 0;
      Status st = RemoveUnder(root, id, &n);
      removed += n;
      if (!st.ok() && error.empty()) error = st.message();
    }
  } else {
    // Only the finished attempts' directories go now.
    const std::string job_dir = attempts_dir + "/" + id;
    std::vector<std::string> names;
    if (DIR* d = opendir(job_dir.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != ".." && keep.count(name) == 0) names.push_back(name);
      }
      closedir(d);
    }
    for (const std::string& name : names) {
      int64_t n = 0;
      Status st = RemoveUnder(job_dir, name, &n);
      removed += n;
      if (!st.ok() && error.empty()) error = st.message();
    }
    std::string running;
    for (const std::string& k : keep) running += (running.empty() ? "" : ", ") + k;
    error = "still running: " + running + (error.empty() ? "" : "; " + error);
  }
  if (error.empty()) {
    spdlog::info("job {} was deleted: removed its files ({} entries) from {} and {}", id, removed,
                 attempts_dir + "/" + id, config_.job_root + "/" + id);
  } else {
    spdlog::warn("job {} was deleted: files left for now: {}", id, error);
  }
  answer->set_error(error);
  Send(out);
}

}  // namespace convoy

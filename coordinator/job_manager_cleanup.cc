// JobManager: deleting finished jobs (DeleteJob and --job-retention), and the removal of
// their files on the workers that ran them (DeleteJobFiles, answered by JobFilesDeleted).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "coordinator/job_manager.h"
#include "coordinator/job_state_machine.h"

namespace convoy {

StatusOr<std::vector<std::string>> JobManager::Delete(const std::string& id,
                                                      const std::string& by) {
  JobRecord* r = Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  const v1::JobState state = r->job.state();
  if (!IsTerminal(state)) {
    return Status::FailedPrecondition("job " + id + " is " + StateName(state) +
                                      ": cancel it first (convoy cancel " + id +
                                      "), then delete it");
  }
  if (r->rt.attempt >= 0 && !r->rt.released) {
    return Status::FailedPrecondition(
        "job " + id + " is " + StateName(state) + " but the ranks of its attempt " +
        std::to_string(r->rt.attempt) + " are still being stopped; try again in a few seconds");
  }
  std::set<std::string> workers;
  for (const v1::Attempt& a : r->job.attempts()) {
    for (const v1::NodeAssignment& n : a.nodes()) workers.insert(n.worker());
  }
  Status st = store_.DeleteJob(id);
  if (!st.ok()) return Status::Unavailable("cannot delete job " + id + ": " + st.message());
  for (const std::string& w : workers) {
    (void)store_.SaveFileDeletion({w, id}, true);
    file_deletions_[w][id] = 0;
    v1::CoordinatorMessage msg;
    msg.mutable_delete_job_files()->set_job_id(id);
    channel_.Send(w, msg);  // not connected: sent when it registers
  }
  // Out of every index (a finished, released job is in none but these).
  if (--jobs_by_state_[state] == 0) jobs_by_state_.erase(state);
  auto owned = jobs_by_owner_.find({r->job.owner(), state});
  if (owned != jobs_by_owner_.end() && --owned->second == 0) jobs_by_owner_.erase(owned);
  for (const auto& [watch_id, fn] : r->watchers) watch_owner_.erase(watch_id);
  active_.erase(id);
  waiting_.erase(id);
  attached_.erase(id);
  dirty_.erase(id);
  history_dirty_.erase(id);
  jobs_.erase(id);
  spdlog::info("job {} ({}) deleted{}; {} worker(s) told to remove its files", id, StateName(state),
               by.empty() ? "" : " by " + by, workers.size());
  return std::vector<std::string>(workers.begin(), workers.end());
}

std::vector<FileDeletion> JobManager::PendingFileDeletions() const {
  std::vector<FileDeletion> out;
  for (const auto& [worker, jobs] : file_deletions_) {
    for (const auto& [id, retry] : jobs) out.push_back({worker, id});
  }
  return out;
}

void JobManager::OnJobFilesDeleted(const std::string& worker, const v1::JobFilesDeleted& msg) {
  auto w = file_deletions_.find(worker);
  if (w == file_deletions_.end()) return;
  auto it = w->second.find(msg.job_id());
  if (it == w->second.end()) return;
  if (!msg.error().empty()) {
    spdlog::warn("worker {} kept files of deleted job {}: {}; asking again in {} s", worker,
                 msg.job_id(), msg.error(), kFileDeletionRetryMs / 1000);
    it->second = clock_.NowMonotonicMs() + kFileDeletionRetryMs;
    return;
  }
  spdlog::info("worker {} removed the files of deleted job {}", worker, msg.job_id());
  (void)store_.SaveFileDeletion({worker, msg.job_id()}, false);
  w->second.erase(it);
  if (w->second.empty()) file_deletions_.erase(w);
}

void JobManager::SendFileDeletions(const std::string& worker, bool all) {
  auto w = file_deletions_.find(worker);
  if (w == file_deletions_.end()) return;
  const int64_t now = clock_.NowMonotonicMs();
  for (auto& [id, retry_at] : w->second) {
    if (!all && (retry_at == 0 || now < retry_at)) continue;
    v1::CoordinatorMessage msg;
    msg.mutable_delete_job_files()->set_job_id(id);
    if (!channel_.Send(worker, msg)) return;
    retry_at = 0;
  }
}

}  // namespace convoy

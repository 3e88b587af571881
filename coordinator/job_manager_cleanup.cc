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
  JobRecord* r = table_.Find(id);
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
  const std::string uid = r->job.uid();
  std::set<std::string> workers;
  for (const v1::Attempt& a : r->job.attempts()) {
    for (const v1::NodeAssignment& n : a.nodes()) workers.insert(n.worker());
  }
  Status st = store_.DeleteJob(id);
  if (!st.ok()) return Status::Unavailable("cannot delete job " + id + ": " + st.message());
  for (const std::string& w : workers) {
    (void)store_.SaveFileDeletion({w, id, uid}, true);
    file_deletions_[w][id] = {uid, 0};
    v1::CoordinatorMessage msg;
    msg.mutable_delete_job_files()->set_job_id(id);
    msg.mutable_delete_job_files()->set_job_uid(uid);
    msg.mutable_delete_job_files()->set_cluster_id(options_.cluster_id);
    channel_.Send(w, msg);  // not connected: sent when it registers
  }
  // Out of every index (a finished, released job is in none but these).
  table_.Erase(id);
  ReleaseIdentityOf(uid);  // now, or when the last worker has removed its files
  spdlog::info("job {} ({}) deleted{}; {} worker(s) told to remove its files", id, StateName(state),
               by.empty() ? "" : " by " + by, workers.size());
  return std::vector<std::string>(workers.begin(), workers.end());
}

std::vector<FileDeletion> JobManager::PendingFileDeletions() const {
  std::vector<FileDeletion> out;
  for (const auto& [worker, jobs] : file_deletions_) {
    for (const auto& [id, pending] : jobs) out.push_back({worker, id, pending.job_uid});
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
    it->second.retry_at = clock_.NowMonotonicMs() + kFileDeletionRetryMs;
    return;
  }
  spdlog::info("worker {} removed the files of deleted job {}", worker, msg.job_id());
  (void)store_.SaveFileDeletion({worker, msg.job_id(), ""}, false);
  const std::string uid = it->second.job_uid;
  w->second.erase(it);
  if (w->second.empty()) file_deletions_.erase(w);
  // Unless the job still exists (not deleted: an attempt's files only): by id, then uid.
  const JobRecord* r = table_.Find(msg.job_id());
  if (r == nullptr || r->job.uid() != uid) ReleaseIdentityOf(uid);
}

void JobManager::SendFileDeletions(const std::string& worker, bool all) {
  auto w = file_deletions_.find(worker);
  if (w == file_deletions_.end()) return;
  const int64_t now = clock_.NowMonotonicMs();
  for (auto& [id, pending] : w->second) {
    if (!all && (pending.retry_at == 0 || now < pending.retry_at)) continue;
    v1::CoordinatorMessage msg;
    msg.mutable_delete_job_files()->set_job_id(id);
    msg.mutable_delete_job_files()->set_job_uid(pending.job_uid);
    msg.mutable_delete_job_files()->set_cluster_id(options_.cluster_id);
    if (!channel_.Send(worker, msg)) return;
    pending.retry_at = 0;
  }
}

void JobManager::ApplyRetention() {
  const int64_t now_mono = clock_.NowMonotonicMs();
  if (now_mono < next_retention_mono_ms_) return;
  next_retention_mono_ms_ = now_mono + kRetentionIntervalMs;
  if (options_.job_retention_ms <= 0 && options_.job_retention_count <= 0) return;
  // Finished jobs by when they ended (their last event), oldest first.
  std::vector<std::pair<int64_t, std::string>> finished;
  finished.reserve(table_.size() - table_.active().size());
  for (const auto& [id, r] : table_.records()) {
    if (!IsTerminal(r.job.state())) continue;
    const int64_t ended = r.job.events_size() > 0
                              ? r.job.events(r.job.events_size() - 1).time_unix_ms()
                              : r.job.updated_unix_ms();
    finished.emplace_back(ended, id);
  }
  std::sort(finished.begin(), finished.end());
  const int64_t now = clock_.NowUnixMs();
  size_t over_count = 0;
  if (options_.job_retention_count > 0 &&
      finished.size() > static_cast<size_t>(options_.job_retention_count)) {
    over_count = finished.size() - static_cast<size_t>(options_.job_retention_count);
  }
  size_t deleted = 0;
  for (size_t i = 0; i < finished.size() && deleted < kRetentionBatch; ++i) {
    const bool too_old =
        options_.job_retention_ms > 0 && now - finished[i].first > options_.job_retention_ms;
    if (!too_old && i >= over_count) break;  // sorted: every later job is newer
    const JobRecord* r = table_.Find(finished[i].second);
    if (r == nullptr || (r->rt.attempt >= 0 && !r->rt.released)) continue;  // stopping
    if (Delete(finished[i].second, "retention").ok()) ++deleted;
  }
  if (deleted == kRetentionBatch) next_retention_mono_ms_ = now_mono;  // more at the next tick
}

}  // namespace convoy

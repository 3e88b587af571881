#include "coordinator/control/file_deletions.h"

#include <spdlog/spdlog.h>

namespace convoy {

void FileDeletions::Restore(const std::vector<FileDeletion>& pending) {
  for (const FileDeletion& d : pending) pending_[d.worker][d.job_id] = {d.job_uid, 0};
}

v1::CoordinatorMessage FileDeletions::Message(const std::string& id, const std::string& uid) const {
  v1::CoordinatorMessage msg;
  msg.mutable_delete_job_files()->set_job_id(id);
  msg.mutable_delete_job_files()->set_job_uid(uid);
  msg.mutable_delete_job_files()->set_cluster_id(cluster_id_);
  return msg;
}

void FileDeletions::Request(const std::set<std::string>& workers, const std::string& id,
                            const std::string& uid) {
  for (const std::string& w : workers) {
    (void)store_.SaveFileDeletion({w, id, uid}, true);
    pending_[w][id] = {uid, 0};
    channel_.Send(w, Message(id, uid));  // not connected: sent when it registers
  }
}

std::optional<std::string> FileDeletions::OnAnswer(const std::string& worker,
                                                   const v1::JobFilesDeleted& msg) {
  auto w = pending_.find(worker);
  if (w == pending_.end()) return std::nullopt;
  auto it = w->second.find(msg.job_id());
  if (it == w->second.end()) return std::nullopt;
  if (!msg.error().empty()) {
    spdlog::warn("worker {} kept files of deleted job {}: {}; asking again in {} s", worker,
                 msg.job_id(), msg.error(), kRetryMs / 1000);
    it->second.retry_at = clock_.NowMonotonicMs() + kRetryMs;
    return std::nullopt;
  }
  spdlog::info("worker {} removed the files of deleted job {}", worker, msg.job_id());
  (void)store_.SaveFileDeletion({worker, msg.job_id(), ""}, false);
  std::string uid = it->second.job_uid;
  w->second.erase(it);
  if (w->second.empty()) pending_.erase(w);
  return uid;
}

void FileDeletions::SendTo(const std::string& worker, bool all) {
  auto w = pending_.find(worker);
  if (w == pending_.end()) return;
  const int64_t now = clock_.NowMonotonicMs();
  for (auto& [id, pending] : w->second) {
    if (!all && (pending.retry_at == 0 || now < pending.retry_at)) continue;
    if (!channel_.Send(worker, Message(id, pending.job_uid))) return;
    pending.retry_at = 0;
  }
}

void FileDeletions::Tick() {
  const int64_t now = clock_.NowMonotonicMs();
  if (pending_.empty() || now < next_retry_mono_ms_) return;
  next_retry_mono_ms_ = now + 1000;
  for (const auto& [worker, jobs] : pending_) SendTo(worker, false);
}

std::vector<FileDeletion> FileDeletions::Forget(const std::string& worker) {
  std::vector<FileDeletion> out;
  auto it = pending_.find(worker);
  if (it == pending_.end()) return out;
  for (const auto& [id, pending] : it->second) out.push_back({worker, id, pending.job_uid});
  pending_.erase(it);
  return out;
}

bool FileDeletions::HoldsFilesOf(const std::string& uid) const {
  for (const auto& [worker, jobs] : pending_) {
    for (const auto& [id, pending] : jobs) {
      if (pending.job_uid == uid) return true;
    }
  }
  return false;
}

std::vector<FileDeletion> FileDeletions::List() const {
  std::vector<FileDeletion> out;
  for (const auto& [worker, jobs] : pending_) {
    for (const auto& [id, pending] : jobs) out.push_back({worker, id, pending.job_uid});
  }
  return out;
}

}  // namespace convoy

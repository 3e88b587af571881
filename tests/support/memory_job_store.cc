#include "tests/support/memory_job_store.h"

#include <iterator>

namespace convoy {

Status MemoryJobStore::SaveJob(const v1::Job& job, const v1::JobEvent* event) {
  if (FailThisWrite()) {
    return Status::Internal("injected write failure");
  }
  v1::Job& stored = jobs_[job.id()];
  auto events = std::move(*stored.mutable_events());
  stored = job;
  *stored.mutable_events() = std::move(events);
  if (event != nullptr) *stored.add_events() = *event;
  return Status::Ok();
}

StatusOr<std::vector<v1::Job>> MemoryJobStore::LoadJobs() {
  std::vector<v1::Job> out;
  for (const auto& [id, job] : jobs_) out.push_back(job);
  return out;
}

Status MemoryJobStore::SaveWorker(const v1::WorkerInfo& worker) {
  if (FailThisWrite()) {
    return Status::Internal("injected write failure");
  }
  workers_[worker.name()] = worker;
  return Status::Ok();
}

StatusOr<std::vector<v1::WorkerInfo>> MemoryJobStore::LoadWorkers() {
  std::vector<v1::WorkerInfo> out;
  for (const auto& [name, w] : workers_) out.push_back(w);
  return out;
}

Status MemoryJobStore::DeleteWorker(const std::string& name) {
  if (FailThisWrite()) {
    return Status::Internal("injected write failure");
  }
  workers_.erase(name);
  for (auto it = file_deletions_.begin(); it != file_deletions_.end();) {
    it = it->worker == name ? file_deletions_.erase(it) : std::next(it);
  }
  return Status::Ok();
}

Status MemoryJobStore::SaveJobMetrics(const v1::JobMetrics& job_metrics) {
  if (FailThisWrite()) {
    return Status::Internal("injected write failure");
  }
  job_metrics_[job_metrics.job_id()] = job_metrics;
  ++job_metrics_writes_;
  return Status::Ok();
}

StatusOr<std::vector<v1::JobMetrics>> MemoryJobStore::LoadJobMetrics() {
  std::vector<v1::JobMetrics> out;
  for (const auto& [id, m] : job_metrics_) out.push_back(m);
  return out;
}

Status MemoryJobStore::DeleteJob(const std::string& id) {
  if (FailThisWrite()) {
    return Status::Internal("injected write failure");
  }
  jobs_.erase(id);
  job_metrics_.erase(id);
  return Status::Ok();
}

Status MemoryJobStore::SaveFileDeletion(const FileDeletion& deletion, bool pending) {
  if (pending) {
    file_deletions_.insert(deletion);
  } else {
    file_deletions_.erase(deletion);
  }
  return Status::Ok();
}

StatusOr<std::vector<FileDeletion>> MemoryJobStore::LoadFileDeletions() {
  return std::vector<FileDeletion>(file_deletions_.begin(), file_deletions_.end());
}

}  // namespace convoy

#include "coordinator/control/section_effects.h"

namespace convoy {

Status WriteBehindStore::Record(StoreWrite w) {
  state_mu_.AssertHeld();
  effects_.writes.push_back(std::move(w));
  return Status::Ok();
}

Status WriteBehindStore::SaveJob(const v1::Job& job, const v1::JobEvent* event) {
  StoreWrite w;
  w.job = job;
  w.job->clear_events();  // the store keeps the log itself
  if (event != nullptr) w.event = *event;
  return Record(std::move(w));
}

StatusOr<std::vector<v1::Job>> WriteBehindStore::LoadJobs() { return durable_.LoadJobs(); }

Status WriteBehindStore::SaveWorker(const v1::WorkerInfo& worker) {
  StoreWrite w;
  w.worker = worker;
  return Record(std::move(w));
}

StatusOr<std::vector<v1::WorkerInfo>> WriteBehindStore::LoadWorkers() {
  return durable_.LoadWorkers();
}

Status WriteBehindStore::DeleteWorker(const std::string& name) {
  StoreWrite w;
  w.delete_worker = name;
  return Record(std::move(w));
}

Status WriteBehindStore::SaveJobMetrics(const v1::JobMetrics& job_metrics) {
  StoreWrite w;
  w.job_metrics = job_metrics;
  return Record(std::move(w));
}

StatusOr<std::vector<v1::JobMetrics>> WriteBehindStore::LoadJobMetrics() {
  return durable_.LoadJobMetrics();
}

Status WriteBehindStore::DeleteJob(const std::string& id) {
  StoreWrite w;
  w.delete_job = id;
  return Record(std::move(w));
}

Status WriteBehindStore::SaveFileDeletion(const FileDeletion& deletion, bool pending) {
  StoreWrite w;
  w.file_deletion = deletion;
  w.file_deletion_pending = pending;
  return Record(std::move(w));
}

StatusOr<std::vector<FileDeletion>> WriteBehindStore::LoadFileDeletions() {
  return durable_.LoadFileDeletions();
}

bool StreamChannel::Send(const std::string& name, const v1::CoordinatorMessage& msg) {
  state_mu_.AssertHeld();
  std::shared_ptr<WorkerStream> stream = streams_.Find(name);
  if (stream == nullptr) return false;
  effects_.sends.emplace_back(std::move(stream), msg);
  return true;
}

}  // namespace convoy

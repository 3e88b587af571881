#include "coordinator/control/watch_hub.h"

namespace convoy {

uint64_t WatchHub::Add(const std::string& job_id, WatchFn fn) {
  const uint64_t id = next_id_++;
  by_job_[job_id][id] = std::move(fn);
  owner_[id] = job_id;
  return id;
}

void WatchHub::Remove(uint64_t watch_id) {
  auto it = owner_.find(watch_id);
  if (it == owner_.end()) return;
  auto job = by_job_.find(it->second);
  if (job != by_job_.end()) {
    job->second.erase(watch_id);
    if (job->second.empty()) by_job_.erase(job);
  }
  owner_.erase(it);
}

void WatchHub::Notify(const std::string& job_id, const v1::WatchJobResponse& update) {
  auto job = by_job_.find(job_id);
  if (job == by_job_.end()) return;
  for (auto& [id, fn] : job->second) fn(update, false);
}

void WatchHub::Close(const std::string& job_id, const v1::WatchJobResponse& final_update) {
  auto job = by_job_.find(job_id);
  if (job == by_job_.end()) return;
  // Taken out first: a callback that unsubscribes (or watches again) cannot touch what is
  // being iterated.
  std::map<uint64_t, WatchFn> watchers = std::move(job->second);
  by_job_.erase(job);
  for (auto& [id, fn] : watchers) {
    owner_.erase(id);
    fn(final_update, true);
  }
}

size_t WatchHub::watchers_of(const std::string& job_id) const {
  auto job = by_job_.find(job_id);
  return job == by_job_.end() ? 0 : job->second.size();
}

}  // namespace convoy

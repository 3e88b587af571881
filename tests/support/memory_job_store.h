// An in-memory JobStore for unit tests, with injectable write failures.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coordinator/store/job_store.h"

namespace convoy {

class MemoryJobStore : public JobStore {
 public:
  Status SaveJob(const v1::Job& job, const v1::JobEvent* event) override;
  StatusOr<std::vector<v1::Job>> LoadJobs() override;
  Status SaveWorker(const v1::WorkerInfo& worker) override;
  StatusOr<std::vector<v1::WorkerInfo>> LoadWorkers() override;
  Status DeleteWorker(const std::string& name) override;
  Status SaveJobMetrics(const v1::JobMetrics& job_metrics) override;
  StatusOr<std::vector<v1::JobMetrics>> LoadJobMetrics() override;
  Status DeleteJob(const std::string& id) override;
  Status SaveFileDeletion(const FileDeletion& deletion, bool pending) override;
  StatusOr<std::vector<FileDeletion>> LoadFileDeletions() override;

  // How many metric histories were written (tests of "written only when changed").
  int job_metrics_writes() const { return job_metrics_writes_; }

  // The next SaveJob, SaveWorker, SaveJobMetrics, DeleteJob or DeleteWorker fails with INTERNAL and
  // stores nothing.
  void FailNextWrite() { fail_next_write_ = true; }
  // Every write from now on fails (a store that stays broken), until StopFailing.
  void FailEveryWrite() { fail_every_write_ = true; }
  void StopFailing() { fail_every_write_ = false; }

 private:
  bool FailThisWrite() {
    if (fail_every_write_) return true;
    return fail_next_write_.exchange(false);
  }
  std::atomic<bool> fail_next_write_{false};
  std::atomic<bool> fail_every_write_{false};
  std::map<std::string, v1::Job> jobs_;  // events kept in Job.events
  std::map<std::string, v1::WorkerInfo> workers_;
  std::map<std::string, v1::JobMetrics> job_metrics_;
  std::set<FileDeletion> file_deletions_;
  int job_metrics_writes_ = 0;
};

}  // namespace convoy

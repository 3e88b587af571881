// Where the coordinator keeps its state. The logic classes see only this interface; the
// SQLite implementation (sqlite_job_store.h) is wired in by main, an in-memory one by tests.
//
// Threading: implementations are called from one thread at a time and need no locking of
// their own. In the coordinator that thread is the commit thread (coordinator/coordinator.h),
// never one holding the state lock: JobManager writes into a write-behind store that only
// queues, and the commit thread applies each queue with Write(), in one transaction.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/job.pb.h"

namespace convoy {

// One write of a batch: a job (with an event to append, or none), a worker, or a job's
// metric history.
struct StoreWrite {
  std::optional<v1::Job> job;  // set for a job write; its events are ignored
  std::optional<v1::JobEvent> event;
  std::optional<v1::WorkerInfo> worker;       // set for a worker write
  std::optional<v1::JobMetrics> job_metrics;  // set for a metric history write
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Durably records `job` (insert or replace, including its attempts) and, when `event` is
  // not null, appends that event to the job's event log, all in one transaction. When this
  // returns OK the write survives a crash of the process (kill -9) right after; on error
  // nothing of it is visible. The coordinator calls this BEFORE acting on a transition.
  // Events already stored are not rewritten: `job.events()` is ignored by the store, which
  // keeps the log itself.
  virtual Status SaveJob(const v1::Job& job, const v1::JobEvent* event) = 0;

  // Every stored job, oldest first by id, each with its attempts and its full event log
  // (oldest first) filled in.
  virtual StatusOr<std::vector<v1::Job>> LoadJobs() = 0;

  // Records a worker's last known state (insert or replace by name).
  virtual Status SaveWorker(const v1::WorkerInfo& worker) = 0;

  // Every stored worker, by name.
  virtual StatusOr<std::vector<v1::WorkerInfo>> LoadWorkers() = 0;

  // Records a job's metric history (insert or replace by job_metrics.job_id), apart from the
  // job's body so that a transition does not rewrite it. Same durability as SaveJob.
  virtual Status SaveJobMetrics(const v1::JobMetrics& job_metrics) = 0;

  // Every stored metric history, by job id.
  virtual StatusOr<std::vector<v1::JobMetrics>> LoadJobMetrics() = 0;

  // Applies `writes` in order, as if by SaveJob/SaveWorker one by one; all or nothing where
  // the store has transactions (SQLite: one transaction, one fsync). Where a job is written
  // more than once, only its last body (and its last metric history) needs writing, but every event
  // is appended, in order. This default calls SaveJob/SaveWorker in turn and stops at the first
  // error.
  virtual Status Write(const std::vector<StoreWrite>& writes) {
    for (const StoreWrite& w : writes) {
      if (w.job) {
        Status st = SaveJob(*w.job, w.event ? &*w.event : nullptr);
        if (!st.ok()) return st;
      }
      if (w.worker) {
        Status st = SaveWorker(*w.worker);
        if (!st.ok()) return st;
      }
      if (w.job_metrics) {
        Status st = SaveJobMetrics(*w.job_metrics);
        if (!st.ok()) return st;
      }
    }
    return Status::Ok();
  }
};

}  // namespace convoy

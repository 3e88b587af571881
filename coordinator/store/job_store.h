// Where the coordinator keeps its state. The logic classes see only this interface; the
// SQLite implementation (sqlite_job_store.h) is wired in by main, an in-memory one by tests.
//
// Threading: implementations are called from one thread at a time and need no locking of
// their own. In the coordinator that thread is the commit thread
// (coordinator/control/coordinator.h), never one holding the state lock: JobManager writes into a
// write-behind store that only queues, and the commit thread applies each queue with Write(), in
// one transaction.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "convoy/v1/job.pb.h"

namespace convoy {

// A deleted job whose files a worker has yet to remove (DeleteJobFiles not yet answered
// without error).
struct FileDeletion {
  std::string worker;
  std::string job_id;
  // The job's uid: its directories on the worker are named by it (JobDirName), so a retry
  // after the job is gone from the store still names them. Empty from an older store.
  std::string job_uid;
  bool operator<(const FileDeletion& o) const {
    return worker != o.worker ? worker < o.worker : job_id < o.job_id;
  }
};

// One write of a batch: a job (with an event to append, or none), a worker, or a job's
// metric history; or a job's or a worker's deletion, or a pending file deletion added or
// settled.
struct StoreWrite {
  std::optional<v1::Job> job;  // set for a job write; its events are ignored
  std::optional<v1::JobEvent> event;
  std::optional<v1::WorkerInfo> worker;       // set for a worker write
  std::optional<v1::JobMetrics> job_metrics;  // set for a metric history write
  std::optional<std::string> delete_job;      // the id of a job to delete (DeleteJob)
  std::optional<std::string> delete_worker;   // the name of a worker to delete (DeleteWorker)
  std::optional<FileDeletion> file_deletion;  // with `file_deletion_pending`
  bool file_deletion_pending = false;         // true: record it; false: it is settled
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

  // Removes the worker `name` (a forgotten worker) and its pending file deletions, in one
  // transaction. A worker that is not stored is no error.
  virtual Status DeleteWorker(const std::string& name) = 0;

  // Records a job's metric history (insert or replace by job_metrics.job_id), apart from the
  // job's body so that a transition does not rewrite it. Same durability as SaveJob.
  virtual Status SaveJobMetrics(const v1::JobMetrics& job_metrics) = 0;

  // Every stored metric history, by job id.
  virtual StatusOr<std::vector<v1::JobMetrics>> LoadJobMetrics() = 0;

  // Removes the job `id` with everything stored under its id (its attempts, events and
  // metric history), in one transaction. A job that is not stored is no error.
  virtual Status DeleteJob(const std::string& id) = 0;

  // Records (`pending`) or settles (!`pending`) a worker's pending removal of a deleted
  // job's files, so that it outlives a coordinator restart. Settling one that is not
  // recorded is no error.
  virtual Status SaveFileDeletion(const FileDeletion& deletion, bool pending) = 0;

  // Every pending file deletion, by worker then job id.
  virtual StatusOr<std::vector<FileDeletion>> LoadFileDeletions() = 0;

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
      if (w.delete_job) {
        Status st = DeleteJob(*w.delete_job);
        if (!st.ok()) return st;
      }
      if (w.delete_worker) {
        Status st = DeleteWorker(*w.delete_worker);
        if (!st.ok()) return st;
      }
      if (w.file_deletion) {
        Status st = SaveFileDeletion(*w.file_deletion, w.file_deletion_pending);
        if (!st.ok()) return st;
      }
    }
    return Status::Ok();
  }
};

}  // namespace convoy

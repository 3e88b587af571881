// Where the coordinator keeps its state. The logic classes see only this interface; the
// SQLite implementation (sqlite_job_store.h) is wired in by main, an in-memory one by tests.
//
// Threading: implementations are called with the coordinator's state lock held, from one
// thread at a time; they need no locking of their own but must not call back into the
// coordinator.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/job.pb.h"

namespace convoy {

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
};

}  // namespace convoy

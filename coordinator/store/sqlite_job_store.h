// The coordinator's durable state in one SQLite file (WAL, synchronous=FULL): jobs, their
// attempts, every event, workers' last known state, and each job's metric history. Raw sqlite3 C
// API.
//
// Threading: as JobStore (one caller at a time: the coordinator's commit thread).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "coordinator/store/job_store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace convoy {

class SqliteJobStore : public JobStore {
 public:
  // Opens (creating when absent) the database at `path`, holding an exclusive lock on
  // `path`.lock while open. Refuses, with an error naming the path: a file that is not an
  // SQLite database; another program's SQLite database; one written by a newer schema; a
  // file another coordinator has open.
  static StatusOr<std::unique_ptr<SqliteJobStore>> Open(const std::string& path);
  ~SqliteJobStore() override;

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
  // One transaction: each job's body and attempts once (its last write), each metric
  // history once (its last write), every event and worker in order.
  Status Write(const std::vector<StoreWrite>& writes) override;

 private:
  SqliteJobStore(sqlite3* db, std::string path, int lock_fd)
      : db_(db), path_(std::move(path)), lock_fd_(lock_fd) {}
  Status Exec(const char* sql);
  // The statement for `sql` (a string literal: cached by its address), prepared on first use
  // and kept for the store's life; null when it cannot be prepared.
  sqlite3_stmt* Cached(const char* sql);
  Status Error(const std::string& what) const;
  // The statements of SaveJob/SaveWorker, inside a transaction the caller opened.
  Status WriteJobBody(const v1::Job& job);
  Status AppendEvent(const std::string& job_id, const v1::JobEvent& event);
  Status WriteWorker(const v1::WorkerInfo& worker);
  Status WriteJobMetrics(const v1::JobMetrics& job_metrics);
  Status RemoveJob(const std::string& id);
  Status RemoveWorker(const std::string& name);
  Status WriteFileDeletion(const FileDeletion& deletion, bool pending);
  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT, rolling back when it fails.
  template <typename F>
  Status InTransaction(F&& body);

  sqlite3* db_;
  const std::string path_;
  const int lock_fd_;  // flock'ed <path>.lock
  std::map<const char*, sqlite3_stmt*> cache_;
};

}  // namespace convoy

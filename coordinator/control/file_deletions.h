// The removal of deleted jobs' files from the workers that ran them (DeleteJobFiles, answered
// by JobFilesDeleted). One of the JobManager's controllers: a removal is persisted
// (JobStore::SaveFileDeletion) until its worker answers without error, sent when the worker
// is connected (now, or when it registers), and asked again every kRetryMs while the worker
// answers with an error (an attempt of the job still runs there).
//
// It also says whether any worker still holds a job's files (HoldsFilesOf), which is what
// keeps a deleted job's identity from being given to another job.
//
// Threading: none of its own; called with the Coordinator's lock held.
// Cost: O(log) per removal; HoldsFilesOf and the retry pass are O(pending removals).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/control/worker_channel.h"
#include "coordinator/store/job_store.h"

namespace convoy {

class FileDeletions {
 public:
  static constexpr int64_t kRetryMs = 30000;

  FileDeletions(const Clock& clock, JobStore& store, WorkerChannel& channel, std::string cluster_id)
      : clock_(clock), store_(store), channel_(channel), cluster_id_(std::move(cluster_id)) {}

  // The removals a previous coordinator persisted (after a restart).
  void Restore(const std::vector<FileDeletion>& pending);
  // Job `id` (uid `uid`) was deleted: each of `workers` is to remove its files. Persisted,
  // then sent to those connected.
  void Request(const std::set<std::string>& workers, const std::string& id, const std::string& uid);
  // A worker's answer. Returns the job's uid when the worker removed the files (no longer
  // pending there); nothing for an error (asked again in kRetryMs) or an answer not asked.
  std::optional<std::string> OnAnswer(const std::string& worker, const v1::JobFilesDeleted& msg);
  // Sends `worker` its removals: every one (`all`, as when it registers), else those due.
  void SendTo(const std::string& worker, bool all);
  // Sends what is due to every worker, at most once a second (from the tick).
  void Tick();
  // The worker is forgotten: its removals are dropped (unpersisted by the caller, with the
  // worker's row). Returns them.
  std::vector<FileDeletion> Forget(const std::string& worker);
  // Whether any worker has yet to remove the files of the job with uid `uid`.
  bool HoldsFilesOf(const std::string& uid) const;
  // Every pending removal, by worker then job.
  std::vector<FileDeletion> List() const;

 private:
  struct Pending {
    std::string job_uid;
    int64_t retry_at = 0;  // monotonic ms; 0: asked, no answer yet
  };
  v1::CoordinatorMessage Message(const std::string& id, const std::string& uid) const;

  const Clock& clock_;
  JobStore& store_;
  WorkerChannel& channel_;
  const std::string cluster_id_;
  std::map<std::string, std::map<std::string, Pending>> pending_;  // worker -> job id ->
  int64_t next_retry_mono_ms_ = 0;
};

}  // namespace convoy

// The job table: every job the coordinator keeps, with the live bookkeeping of its current
// attempt, and every index over them. Each index is kept here and only here, so that each
// invariant has one place:
//   - by_state() counts every job by state, and by_owner() by (owner, state);
//   - active() is the jobs not in a terminal state, waiting() those PENDING or RESTARTING
//     (a sweep, which is never placed, excepted);
//   - attached() is the jobs whose attempt holds workers, and JobsOn(w) those that hold `w`;
//   - FindByRequest(owner, request id) is the job submitted with that request id;
//   - dirty() and history_dirty() are the jobs whose record or metric history changed since
//     it was written.
// Insert, SetState, Attach, Detach and Erase keep them all; nothing else changes them.
//
// Threading: none of its own; the JobManager calls it with the Coordinator's lock held.
// Cost: every call is O(log jobs), and Attach/Detach O(the attempt's workers).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "convoy/v1/job.pb.h"
#include "coordinator/state/failure_attribution.h"
#include "coordinator/state/list_query.h"
#include "coordinator/state/metric_book.h"
#include "coordinator/state/metric_history.h"

namespace convoy {

struct RankRuntime {
  std::string worker;
  int local_rank = 0;
  bool started = false;
  bool gone = false;  // exited, or its worker was lost
  int pid = 0;
  int64_t last_progress_mono_ms = 0;
  bool reported = false;        // any record of this attempt came from it (hang detection)
  bool stopped = false;         // its worker's last heartbeat said its process is stopped
  v1::RankResources resources;  // what it holds on its worker until it is gone
};
// Live bookkeeping of a job's current attempt (not persisted; rebuilt by Recover).
struct AttemptRuntime {
  explicit AttemptRuntime(FailureAttribution f) : failures(std::move(f)) {}
  int attempt = -1;
  std::map<int, RankRuntime> ranks;
  bool launched = false;  // Launch messages sent
  bool tearing_down = false;
  bool released = false;         // slots free again
  bool recovering = false;       // reloaded after a coordinator restart, not yet re-confirmed
  int64_t deadline_mono_ms = 0;  // of the rendezvous, then of the teardown
  // The failure window, the rendezvous deadline and the next hang check.
  FailureAttribution failures;
  // Ranks by worker, and how many ranks have started / are gone: O(1) checks per event.
  std::map<std::string, std::vector<int>> ranks_by_worker;
  size_t started_count = 0;
  size_t gone_count = 0;
  // Workers not yet back after a coordinator restart (recovering attempts).
  std::set<std::string> awaiting;
  // For the phase durations (monotonic; 0: not known, e.g. after a coordinator restart).
  int64_t placed_mono_ms = 0;
  // Where max_runtime is timed from (monotonic): the placement, or for an attempt restored
  // after a coordinator restart its wall-clock start, read once (0: not yet).
  int64_t runtime_from_mono_ms = 0;
  bool first_record_seen = false;
  // Its ranks were asked to checkpoint and stop (preempted, resized): their exits are no
  // failure.
  bool preempting = false;
};
struct JobRecord {
  explicit JobRecord(AttemptRuntime r) : rt(std::move(r)) {}
  v1::Job job;
  AttemptRuntime rt;
  MetricBook metrics;  // job.latest, merged
  MetricHistory history{"", MetricHistory::kMaxPointsPerRank};
  int64_t history_saved_mono_ms = 0;  // when the history was last written
  int64_t waiting_since_mono_ms = 0;  // when it last became PENDING or RESTARTING
  // Workers its next placement avoids when others fit (README "When nodes are sick"): the
  // node its last attempt failed on for the node's reasons, a hang's suspect, a replaced
  // straggler's. In memory only.
  std::vector<std::string> avoid;
};

class JobTable {
 public:
  using Records = std::map<std::string, JobRecord, JobIdLess>;  // in submission order
  using IdSet = std::set<std::string, JobIdLess>;

  explicit JobTable(const Clock& clock) : clock_(clock) {}

  // The id the next new job gets: j-NNNNNN, after every id inserted so far (so after a
  // restart, after every stored one).
  std::string NextId() const;
  // Adds job `job` (its id not in the table) with runtime `rt`, indexed by its state.
  JobRecord& Insert(v1::Job job, AttemptRuntime rt);
  JobRecord* Find(const std::string& id);
  const JobRecord* Find(const std::string& id) const;
  // The job that `owner` submitted with SubmitJobRequest.request_id `request_id`; null when
  // none is kept (never for an empty request id).
  const JobRecord* FindByRequest(const std::string& owner, const std::string& request_id) const;
  // Job `id` when a worker's report of it, naming uid `uid`, is of this job (and not of
  // another with the same id, from another cluster or an older state directory); null
  // otherwise.
  JobRecord* FindAttemptOf(const std::string& id, const std::string& uid);
  // A uid a worker reported matches the job's: equal, or either empty (from before
  // identities).
  static bool SameUid(const std::string& reported, const std::string& job_uid) {
    return reported.empty() || job_uid.empty() || reported == job_uid;
  }
  // The job `id`, which must be in the table.
  JobRecord& at(const std::string& id) { return records_.at(id); }
  const JobRecord& at(const std::string& id) const { return records_.at(id); }
  Records& records() { return records_; }
  const Records& records() const { return records_; }
  size_t size() const { return records_.size(); }

  // Job `id` went from state `from` to `to` (its record already says `to`).
  void SetState(const std::string& id, v1::JobState from, v1::JobState to);
  // Installs `rt` as the job's attempt runtime: its rank indexes are rebuilt, and the job is
  // indexed under every worker its ranks use.
  void Attach(JobRecord& r, AttemptRuntime rt);
  // The attempt holds no worker any more (its rank state is dropped: nothing later scans it).
  void Detach(JobRecord& r);
  // Removes job `id` and every trace of it in the indexes (an attached attempt is detached
  // first, so that no index keeps it; callers delete finished jobs, which hold no worker).
  void Erase(const std::string& id);

  const IdSet& active() const { return active_; }
  const IdSet& waiting() const { return waiting_; }
  const IdSet& attached() const { return attached_; }
  // The jobs whose attempt holds `worker`, a copy (callers change the table as they go).
  std::vector<std::string> JobsOn(const std::string& worker) const;
  const std::map<v1::JobState, int>& by_state() const { return by_state_; }
  const std::map<std::pair<std::string, v1::JobState>, int>& by_owner() const { return by_owner_; }

  void MarkDirty(const std::string& id) { dirty_.insert(id); }
  // The jobs marked dirty, which are no longer marked.
  std::set<std::string> TakeDirty() { return std::exchange(dirty_, {}); }
  void MarkClean(const std::string& id) { dirty_.erase(id); }
  void MarkHistoryDirty(const std::string& id) { history_dirty_.insert(id); }
  // Unmarks the job's history; true when it was marked.
  bool TakeHistoryDirty(const std::string& id) { return history_dirty_.erase(id) > 0; }
  std::set<std::string>& history_dirty() { return history_dirty_; }

 private:
  const Clock& clock_;
  Records records_;
  int64_t next_number_ = 1;
  std::map<v1::JobState, int> by_state_;
  std::map<std::pair<std::string, v1::JobState>, int> by_owner_;
  IdSet active_;
  IdSet waiting_;
  IdSet attached_;
  std::map<std::string, std::set<std::string>> jobs_on_;  // worker -> attached jobs
  // (owner, request id) -> job id, for jobs submitted with a request id.
  std::map<std::pair<std::string, std::string>, std::string> by_request_;
  std::set<std::string> dirty_;
  std::set<std::string> history_dirty_;
};

}  // namespace convoy

// The one way a job's record changes durably. A transition is written to the JobStore with
// its event before memory changes, and only then are the table's indexes, the statistics and
// the watchers told; a failed write means no transition. Changes without an event (rank
// exits, metrics, released slots) only mark the job dirty, and Flush writes each dirty job
// once (from the tick), with the metric histories that are due.
//
// One of the JobManager's controllers. What follows a transition elsewhere (a scheduling
// pass when a job waits, JobFinished to the workers when it ends) is the `on_transition`
// hook's, called last.
//
// Threading: none of its own; called with the Coordinator's lock held.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "coordinator/control/job_stats.h"
#include "coordinator/control/watch_hub.h"
#include "coordinator/state/job_table.h"
#include "coordinator/store/job_store.h"

namespace convoy {

class JobWriter {
 public:
  using TransitionFn = std::function<void(JobRecord& r, v1::JobState from, v1::JobState to)>;

  // A running job's changed metric history is written at most every
  // `history_save_interval_ms` (a finished job's at once, with its last transition).
  JobWriter(const Clock& clock, JobStore& store, JobTable& table, WatchHub& watches,
            JobStats& stats, int64_t history_save_interval_ms, TransitionFn on_transition)
      : clock_(clock),
        store_(store),
        table_(table),
        watches_(watches),
        stats_(stats),
        history_save_interval_ms_(history_save_interval_ms),
        on_transition_(std::move(on_transition)) {}

  // Persists the job in state `to` with an event (and `failure`, when one caused it), then
  // updates memory, the indexes and the statistics, and tells the watchers (a final snapshot
  // when the job ended). FAILED_PRECONDITION for a move the state machine forbids;
  // UNAVAILABLE when the write failed (nothing changed).
  Status Transition(JobRecord& r, v1::JobState to, const std::string& reason,
                    const v1::RankFailure* failure = nullptr);
  // Persists an event that changes no state (a straggler named, a node cordoned): from and
  // to are the job's state. Then the watchers are told. UNAVAILABLE when the write failed.
  Status Note(JobRecord& r, const std::string& reason);
  // The job changed without an event: written at the next Flush.
  void MarkChanged(JobRecord& r);
  // Writes the job as it is (no event) now. Logs on failure.
  void SaveNow(JobRecord& r);
  // Writes every job marked changed once, and every changed history that is due.
  void Flush();

 private:
  // Writes the job's metric history now. Logs on failure.
  void SaveHistory(JobRecord& r);

  const Clock& clock_;
  JobStore& store_;
  JobTable& table_;
  WatchHub& watches_;
  JobStats& stats_;
  const int64_t history_save_interval_ms_;
  const TransitionFn on_transition_;
};

}  // namespace convoy

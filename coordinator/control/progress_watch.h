// When nodes are sick (README): stragglers and collective hangs named from the step records
// every rank already reports (the built-in trainer, or convoy_metrics.report in a user's own
// script). One of the JobManager's controllers. Per running attempt it keeps a StepWatch
// (coordinator/state/step_watch.h: the rules), fed with each metric batch, and acts on what
// it finds:
//   - a straggler named (or no longer one): an event, Job.stragglers, Job.step_times, a
//     counter; with `on_straggler: replace` and a spare worker that fits (ready, healthy, not
//     in the job), the attempt is asked to save its state and stop (preempted, kind
//     "straggler": RESTARTING, no restart used, Job.node_moves counted) and the next attempt
//     avoids the straggler's node; without a spare it says so and tries again every few
//     seconds;
//   - a collective hang (spec hang_steps): the attempt fails with cause FAILURE_HANG, the
//     suspect named in the reason, and the next attempt avoids its node;
//   - bad steps (trainer.max_bad_steps; common/rank_contract.h): steps the ranks skipped
//     because a loss or gradient norm was not finite become an event (at most one every
//     kBadStepNoteMs while more follow) and a counter, and a rewind an event of its own.
//
// Threading: none of its own; called with the Coordinator's lock held.
// Cost: a batch is O(its records) plus a StepWatch evaluation per completed step; Check is
// O(the attempt's ranks) only when a hang or a replacement is due, else O(1).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/clock.h"
#include "convoy/v1/worker.pb.h"
#include "coordinator/control/attempt_lifecycle.h"
#include "coordinator/control/job_stats.h"
#include "coordinator/control/job_writer.h"
#include "coordinator/sched/capacity_ledger.h"
#include "coordinator/state/job_table.h"
#include "coordinator/state/step_watch.h"
#include "coordinator/state/worker_registry.h"

namespace convoy {

class ProgressWatch {
 public:
  // A straggler without a spare is offered one again this often.
  static constexpr int64_t kReplaceRetryMs = 5000;
  // Job.step_times is refreshed at most this often (a 10,000-rank job evaluates every step).
  static constexpr int64_t kPublishEveryMs = 1000;
  // Skipped bad steps are noted in the job's events at most this often.
  static constexpr int64_t kBadStepNoteMs = 10000;

  ProgressWatch(const Clock& clock, JobWriter& writer, AttemptLifecycle& lifecycle,
                const WorkerRegistry& workers, const CapacityLedger& ledger, JobStats& stats)
      : clock_(clock),
        writer_(writer),
        lifecycle_(lifecycle),
        workers_(workers),
        ledger_(ledger),
        stats_(stats) {}

  // A metric batch of `r`'s current attempt from `worker` (already checked to be its).
  void OnRecords(JobRecord& r, const std::string& worker, const v1::MetricBatch& batch);
  // From the tick, for every attached job: a hang by progress, a straggler to replace.
  void Check(JobRecord& r);
  // `r` went to `to`: a watch of an attempt that no longer runs is dropped, with what it
  // named (Job.stragglers, Job.step_times).
  void OnTransition(JobRecord& r, v1::JobState to);

 private:
  struct Watch {
    Watch(int a, StepWatch s) : attempt(a), steps(std::move(s)) {}
    int attempt;
    StepWatch steps;
    int64_t published_mono_ms = 0;
    int64_t next_replace_mono_ms = 0;
    bool told_no_spare = false;
    std::map<int, std::pair<int64_t, int64_t>> named;  // rank -> (named unix ms, at step)
    int64_t bad_steps = 0;                             // the attempt's, as rank 0 counts
    int64_t bad_steps_noted = 0;                       // as far as an event said
    int64_t bad_step_note_mono_ms = 0;                 // when it last said so
  };
  Watch* WatchOf(JobRecord& r);
  // Rank 0's step and rewind records: bad steps skipped, rewinds.
  void OnBadSteps(JobRecord& r, Watch& w, const v1::MetricRecord& rec, int64_t now);
  // Acts on what the last records changed: events, Job.stragglers.
  void Publish(JobRecord& r, Watch& w, bool force);
  // With on_straggler: replace, swaps a named straggler's node for a spare when one fits.
  void MaybeReplace(JobRecord& r, Watch& w);
  // A worker that is ready, takes new ranks, runs none of `r`'s ranks and fits a node of it.
  std::string SpareFor(const JobRecord& r) const;

  const Clock& clock_;
  JobWriter& writer_;
  AttemptLifecycle& lifecycle_;
  const WorkerRegistry& workers_;
  const CapacityLedger& ledger_;
  JobStats& stats_;
  std::map<std::string, Watch> watches_;  // by job id, of attempts that run
};

}  // namespace convoy

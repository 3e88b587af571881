// Sweeps (README "Sweeps"): a job whose spec has `sweep` runs no process and is never
// placed; this controller makes its trials, ordinary jobs (Job.sweep_id, trial_parameters)
// submitted as its owner submits any job, keeping at most max_parallel of them unfinished,
// stops hopeless ones early (ASHA, coordinator/state/sweep_ranking.h) and sums them up in the
// sweep's Job.sweep (SweepStatus) and state:
//   PENDING  until its first trial is made, then RUNNING;
//   SUCCEEDED once every trial ended, when one succeeded or was stopped early; else FAILED;
//   CANCELLED by its owner: its unfinished trials are cancelled, no more are made.
//
// Event-driven, no thread or poll of its own: a trial's transition (OnTransition) or metric
// records (OnRecords) update its sweep's status; the work that makes or ends jobs (the next
// trials, the sweep's end) runs in Tick for the sweeps that something happened to, so that it
// never runs inside another job's transition. A trial refused for quota
// (RESOURCE_EXHAUSTED) waits in the sweep and is tried again when any job starts or ends.
//
// Durable state is the sweep's and its trials' job records only (JobStore, SQLite or etcd):
// the sweep's status is written with the sweep (JobWriter::MarkChanged), the trials are
// jobs. Recover rebuilds the rest after a restart: the trial plan from the spec
// (deterministic), trials whose sweep's record did not yet name them are adopted by their
// parameters, ASHA's rungs are recomputed from the trials' metric histories (loss,
// test_accuracy and test_loss; other metrics' rungs restart empty), and trials not yet made
// are made at the next Tick.
//
// Threading: none of its own; the JobManager calls it with the Coordinator's lock held.
// Cost: O(records) per batch plus O(trials at a rung) per rung crossed; a pass is O(trials of
// that sweep).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/job.pb.h"
#include "convoy/v1/worker.pb.h"
#include "coordinator/control/job_writer.h"
#include "coordinator/control/watch_hub.h"
#include "coordinator/state/job_table.h"
#include "coordinator/state/sweep_ranking.h"
#include "spec/sweep_spec.h"

namespace convoy {

class SweepController {
 public:
  struct Hooks {
    // Makes trial `index` of `sweep` (values `values`, spec `spec`) as any submit by the
    // sweep's owner makes a job (role, quotas, identity), with Job.sweep_id and
    // trial_parameters set before it is first written. Returns its id.
    std::function<StatusOr<std::string>(const v1::JobSpec& spec, const v1::Job& sweep,
                                        const TrialValues& values, int index)>
        submit;
    // Cancels the unfinished job `id` with `reason` as its event's reason.
    std::function<Status(const std::string& id, const std::string& reason)> cancel;
  };

  SweepController(JobTable& table, JobWriter& writer, WatchHub& watches, Hooks hooks)
      : table_(table), writer_(writer), watches_(watches), hooks_(std::move(hooks)) {}

  // For a spec with `sweep`: checks every trial (ExpandSweep: INVALID_ARGUMENT naming the
  // field) and returns the first trial's spec, which quotas and resume_from are checked
  // with. For any other spec: the spec itself.
  static StatusOr<v1::JobSpec> CheckSubmit(const v1::JobSpec& spec);

  // The sweep `sweep` was just stored (PENDING): makes its first trials now.
  void OnSubmitted(JobRecord& sweep);
  // After every job was loaded (and its metric history restored) at a restart.
  void Recover();
  // Any job's transition (after it was written).
  void OnTransition(JobRecord& r, v1::JobState to);
  // A trial's metric records (after the JobManager took them): its best value, ASHA.
  void OnRecords(JobRecord& trial, const v1::MetricBatch& batch);
  // The sweep was just cancelled: cancels its unfinished trials; no more are made.
  void OnCancelled(JobRecord& sweep);
  // The sweep `sweep_id` may make trials now (its `after` dependencies were met: Pass makes
  // none while Job.waiting_for is not empty): they are made at the next Tick.
  void Wake(const std::string& sweep_id) { due_.insert(sweep_id); }
  // The job `id` was deleted (a sweep's own state goes with it).
  void OnDeleted(const std::string& id) { sweeps_.erase(id); }
  // Makes the next trials and ends the sweeps that something happened to; tells watchers
  // of changed sweeps.
  void Tick();

 private:
  struct Runtime {
    explicit Runtime(AshaRungs::Options o) : asha(o) {}
    SweepSettings settings;
    std::vector<TrialValues> plan;
    AshaRungs asha;
    std::map<std::string, int> index;  // trial job id -> its place in the plan
    std::map<int, int64_t> last_step;  // place -> the newest step it reported
  };

  Runtime& Load(JobRecord& sweep);
  // Makes trials while fewer than max_parallel are unfinished; ends the sweep when every
  // trial ended.
  void Pass(JobRecord& sweep, Runtime& rt);
  // The sweep's counts and best trial from its trials' summaries.
  static void Recount(v1::Job& sweep, const SweepSettings& settings);
  void Changed(JobRecord& sweep);
  // Replays a trial's metric history into ASHA's rungs (Recover).
  void ReplayHistory(Runtime& rt, int place, const JobRecord& trial);

  JobTable& table_;
  JobWriter& writer_;
  WatchHub& watches_;
  const Hooks hooks_;
  std::map<std::string, Runtime, JobIdLess> sweeps_;
  std::set<std::string, JobIdLess> due_;      // a pass at the next Tick
  std::set<std::string, JobIdLess> changed_;  // watchers told at the next Tick
  std::set<std::string, JobIdLess> blocked_;  // a trial refused for quota: retried later
};

}  // namespace convoy

// Sharing the cluster (README "Sharing a cluster"): the scheduling pass and the preemptions
// it asks for, quotas, fair share (each owner's decayed use), max_runtime, and elastic jobs
// growing when workers join. One of the JobManager's controllers: it decides which waiting
// job starts where (through the Scheduler policy), and the AttemptLifecycle carries it out.
//
// A pass runs when something changed (Needed: a job waits, resources were freed, a worker
// became ready) at the next Tick, and at least every reschedule_interval_ms while jobs wait
// (ageing, estimates); never once per worker event (10,000 workers registering must not each
// run the scheduler). Accounting, max_runtime and growth run once a second.
//
// Threading: none of its own; called with the Coordinator's lock held.
// Cost: a pass is O(waiting jobs + attached jobs + ready workers) plus the policy's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/control/attempt_lifecycle.h"
#include "coordinator/control/job_writer.h"
#include "coordinator/sched/capacity_ledger.h"
#include "coordinator/sched/quota.h"
#include "coordinator/sched/scheduler.h"
#include "coordinator/state/job_table.h"
#include "coordinator/state/worker_registry.h"

namespace convoy {

class SchedulingController {
 public:
  // JobManagerOptions::scheduling.
  struct Options {
    // Which waiting jobs start, and where; null: FIFO with backfill (FifoScheduler). Not owned.
    const Scheduler* scheduler = nullptr;
    // While jobs wait, the queue is planned again at least this often (ageing, estimates).
    int64_t reschedule_interval_ms = 5000;
    // Fair share: an owner's use of the cluster (slot-seconds) halves in this long.
    int64_t usage_half_life_ms = 3600 * 1000;
    // Quota: jobs one owner may have waiting (PENDING or RESTARTING) at once; a submit past it
    // is refused with RESOURCE_EXHAUSTED naming the quota. 0: no limit. Jobs without an owner
    // (an --insecure coordinator's) are not counted. The default of `quotas`.
    int max_queued_per_owner = 0;
    // Quotas per owner, role and user (coordinator/sched/quota.h): processes, GPUs, waiting jobs.
    // Its queued default is max_queued_per_owner when it has none.
    QuotaRules quotas;
    // Jobs whose spec says nothing of `preemptible` are preemptible when their priority is
    // below this (the default: negative priorities).
    int preemptible_below = 0;
    // Elastic jobs grow (when workers join) at most once per this long, unless their spec's
    // resize_interval says otherwise; counted from the start of the current attempt.
    int64_t min_resize_interval_ms = 60000;
  };

  SchedulingController(const Clock& clock, Options options, JobTable& table,
                       const CapacityLedger& ledger, AttemptLifecycle& lifecycle, JobWriter& writer,
                       const WorkerRegistry& workers)
      : clock_(clock),
        options_(std::move(options)),
        scheduler_(options_.scheduler != nullptr ? *options_.scheduler : fifo_),
        table_(table),
        ledger_(ledger),
        lifecycle_(lifecycle),
        writer_(writer),
        workers_(workers) {}

  // Something changed that may let a waiting job start: a pass runs at the next Tick.
  void Needed() { needed_ = true; }
  // Whether a waiting job is held out of every pass (it waits for other jobs: `after`,
  // coordinator/control/dependencies.h). Set once, by the owner.
  using HoldFn = std::function<bool(const std::string& id)>;
  void SetHold(HoldFn hold) { hold_ = std::move(hold); }
  // Places every job that waits (PENDING, or RESTARTING whose teardown finished) that the
  // policy places now, asks for the preemptions it wants, and records why the others wait.
  void Pass();
  // From the coordinator's tick.
  void Tick();

  // The quota of the job's owner.
  Quota QuotaOf(const v1::Job& job) const;
  // Whether a job of higher priority may preempt a job of `spec`.
  bool IsPreemptible(const v1::JobSpec& spec) const;
  // What `r`'s attempt holds, per worker (ranks not gone).
  static std::vector<NodeHold> Holds(const JobRecord& r);

 private:
  // Decays every owner's use and adds what their attached jobs hold now; stops attempts that
  // outlived their spec's max_runtime.
  void AccountAndEnforceRuntime();
  // Grows elastic jobs below max_nodes when workers are free for more nodes and nothing waits
  // (once per resize interval each).
  void GrowElasticJobs();

  const Clock& clock_;
  const Options options_;
  const FifoScheduler fifo_;
  const Scheduler& scheduler_;
  JobTable& table_;
  const CapacityLedger& ledger_;
  AttemptLifecycle& lifecycle_;
  JobWriter& writer_;
  const WorkerRegistry& workers_;
  bool needed_ = false;
  HoldFn hold_;
  int64_t next_pass_mono_ms_ = 0;
  std::map<std::string, double> usage_;  // owner -> decayed slot-seconds (fair share)
  int64_t usage_updated_mono_ms_ = 0;
};

}  // namespace convoy

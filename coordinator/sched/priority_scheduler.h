// The shared cluster's scheduler (issue 16; README "Sharing a cluster"): priorities, fair
// share between owners, ageing, and one reservation with backfill. Pure logic, no I/O; the
// clock is the context's.
//
// Order: the highest effective priority first, where a job's effective priority is its
// spec's `priority` plus one for every `ageing` it has waited (nothing waits forever behind a
// stream of higher-priority work); among equals, the owner with the least recent use (decayed
// slot-seconds, computed by the JobManager) first; then submission order.
//
// Reservation (EASY backfill): in that order each job that fits is placed. The first one that
// does not fit becomes first in line: the workers it will start on are chosen as the running
// jobs end (by their max_runtime, earliest first; if some have none, as they all end), and
// the free slots it needs there are held for it. A later job may still start now where it fits
// without the held slots, or on them when its max_runtime ends before the first-in-line job's
// estimated start. So the first-in-line job is never delayed by a job that started after it
// became first in line; it starts by its estimate when every running job honours its
// max_runtime (the JobManager stops attempts that exceed it), else as soon as the jobs on its
// workers end. Jobs of higher effective priority that arrive later still go first. A job
// over its owner's quota (ScheduleContext::quotas, else PriorityPolicy::max_slots_per_owner)
// waits without a reservation.
//
// Preemption: when the first job in line does not fit now, running jobs that are preemptible
// (RunningJob::preemptible) and of lower `priority` (the spec's, not aged: waiting never
// earns the right to stop others) are chosen as victims, the lowest priority and then the
// youngest first, as few as free enough for it (ChooseVictims); the plan lists them and the
// JobManager asks their ranks to checkpoint and stop. The first-in-line job then holds those
// slots and starts when the victims have stopped. A victim waits again, without a restart.
#pragma once

#include <cstdint>

#include "coordinator/sched/scheduler.h"

namespace convoy {

struct PriorityPolicy {
  // One step of effective priority per this much waiting (0: no ageing).
  int64_t ageing_ms = 15 * 60 * 1000;
  // Quota: the processes one owner's jobs may run at once (0: no limit). A job that would
  // take its owner past it waits, saying so, and holds no reservation. Jobs without an owner
  // (an --insecure coordinator's) are not counted.
  int max_slots_per_owner = 0;
};

class PriorityScheduler : public Scheduler {
 public:
  explicit PriorityScheduler(PriorityPolicy policy = {}) : policy_(policy) {}
  SchedulePlan Plan(const std::vector<WaitingJob>& waiting, std::vector<WorkerCapacity> capacity,
                    const ScheduleContext& context) const override;
  // `spec.priority` plus the ageing of a job waiting since `waiting_since_ms`.
  int EffectivePriority(const v1::JobSpec& spec, int64_t waiting_since_ms, int64_t now_ms) const;
  // The running jobs to stop so that `spec` fits `capacity` (the free resources now): among
  // the preemptible ones of lower priority that are not stopping, the lowest priority first,
  // then the youngest, until it fits; then every victim that is not needed is spared (the
  // most valuable first). Empty when no choice frees enough. By id.
  static std::vector<std::string> ChooseVictims(const v1::JobSpec& spec,
                                                const std::vector<std::string>& preferred,
                                                const std::vector<WorkerCapacity>& capacity,
                                                const std::vector<RunningJob>& running);

 private:
  const PriorityPolicy policy_;
};

}  // namespace convoy

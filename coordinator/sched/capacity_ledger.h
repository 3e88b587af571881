// The capacity ledger: what the ranks that are not gone hold on each worker (slots, GPU
// indices, cores, memory), and so what each worker has free for the scheduler. One of the
// JobManager's controllers: ranks take their share when their attempt is placed (or restored)
// and give it back when they are gone; nothing else changes it.
//
// Invariant: a worker's entry is the sum of the holds not yet given back, and is absent when
// that sum is nothing; used_slots() is the sum of every entry's slots.
// Threading: none of its own; called with the Coordinator's lock held. Every call is
// O(log workers + the GPUs concerned).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "convoy/v1/job.pb.h"
#include "coordinator/sched/scheduler.h"

namespace convoy {

class CapacityLedger {
 public:
  // One rank on `worker`, with `resources`, holds (Take) or gives back (Give) one slot and
  // its share.
  void Take(const std::string& worker, const v1::RankResources& resources) {
    Change(worker, resources, 1);
  }
  void Give(const std::string& worker, const v1::RankResources& resources) {
    Change(worker, resources, -1);
  }

  int UsedSlots(const std::string& worker) const;
  int64_t used_slots() const { return used_total_; }
  // The GPU indices of `w` no rank holds, lowest first.
  std::vector<int> FreeGpus(const v1::WorkerInfo& w) const;
  // Fills `w`'s used_slots, used_cpus, used_memory_bytes and used_gpus.
  void AddUse(v1::WorkerInfo& w) const;
  // What `w` has free, for a scheduling pass (its jobs and labels are the caller's).
  WorkerCapacity CapacityOf(const v1::WorkerInfo& w) const;
  // Workers with anything held (tests).
  size_t workers_in_use() const { return use_.size(); }

 private:
  struct Use {
    int slots = 0;
    int cpus = 0;
    int64_t memory = 0;
    std::set<int> gpus;
  };
  void Change(const std::string& worker, const v1::RankResources& resources, int sign);

  std::map<std::string, Use> use_;
  int64_t used_total_ = 0;
};

}  // namespace convoy

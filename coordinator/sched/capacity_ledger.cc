#include "coordinator/sched/capacity_ledger.h"

#include <algorithm>

namespace convoy {

void CapacityLedger::Change(const std::string& worker, const v1::RankResources& resources,
                            int sign) {
  Use& u = use_[worker];
  u.slots += sign;
  used_total_ += sign;
  u.cpus += sign * resources.cpus();
  u.memory += sign * resources.memory_bytes();
  for (int g : resources.gpus()) {
    if (sign > 0) {
      u.gpus.insert(g);
    } else {
      u.gpus.erase(g);
    }
  }
  if (u.slots == 0 && u.gpus.empty() && u.cpus == 0 && u.memory == 0) use_.erase(worker);
}

int CapacityLedger::UsedSlots(const std::string& worker) const {
  auto it = use_.find(worker);
  return it == use_.end() ? 0 : it->second.slots;
}

std::vector<int> CapacityLedger::FreeGpus(const v1::WorkerInfo& w) const {
  auto used = use_.find(w.name());
  std::vector<int> free;
  for (int g : w.gpus()) {
    if (used == use_.end() || used->second.gpus.count(g) == 0) free.push_back(g);
  }
  std::sort(free.begin(), free.end());
  return free;
}

void CapacityLedger::AddUse(v1::WorkerInfo& w) const {
  auto it = use_.find(w.name());
  if (it == use_.end()) return;
  w.set_used_slots(it->second.slots);
  w.set_used_cpus(it->second.cpus);
  w.set_used_memory_bytes(it->second.memory);
  for (int g : it->second.gpus) w.add_used_gpus(g);
}

WorkerCapacity CapacityLedger::CapacityOf(const v1::WorkerInfo& w) const {
  WorkerCapacity c;
  c.name = w.name();
  c.gpus = w.gpus_size();
  c.labels = &w.labels();
  auto it = use_.find(w.name());
  const Use none;
  const Use& u = it == use_.end() ? none : it->second;
  c.free_slots = w.slots() - u.slots;
  int free_gpus = 0;
  for (int g : w.gpus()) free_gpus += u.gpus.count(g) == 0 ? 1 : 0;
  c.free_gpus = free_gpus;
  c.free_cpus = std::max(0, w.cores() - u.cpus);
  c.free_memory = w.memory_bytes() > 0 ? std::max<int64_t>(0, w.memory_bytes() - u.memory) : -1;
  return c;
}

}  // namespace convoy

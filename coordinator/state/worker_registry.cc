#include "coordinator/state/worker_registry.h"

namespace convoy {

bool HealthAllowsRanks(const v1::WorkerHealth& health) {
  return health.state() == v1::HEALTH_OK || health.state() == v1::HEALTH_STATE_UNSPECIFIED;
}

bool TakesNewRanks(const v1::WorkerInfo& w) {
  return w.state() == v1::WORKER_READY && !w.drained() && !w.cordoned() &&
         HealthAllowsRanks(w.health());
}

std::string WhyNoNewRanks(const v1::WorkerInfo& w) {
  if (w.state() != v1::WORKER_READY) return "";
  if (w.health().state() == v1::HEALTH_FAILING) return "unhealthy: " + w.health().reason();
  if (w.health().state() == v1::HEALTH_CHECKING) return "its first health check runs";
  if (w.cordoned()) return "cordoned: " + w.cordon_reason();
  if (w.drained()) return "drained";
  return "";
}

void WorkerRegistry::SetState(Entry& e, v1::WorkerState state) {
  const v1::WorkerState from = e.info.state();
  if (from != v1::WORKER_STATE_UNSPECIFIED) {
    if (--counts_[from] == 0) counts_.erase(from);
    if (from == v1::WORKER_READY) ready_slots_ -= e.info.slots();
  }
  e.info.set_state(state);
  ++counts_[state];
  if (state == v1::WORKER_READY) ready_slots_ += e.info.slots();
  if (state == v1::WORKER_LOST && e.in_heard_order) {
    heard_order_.erase(e.heard);
    e.in_heard_order = false;
  }
}

void WorkerRegistry::Heard(Entry& e) {
  e.last_heard_mono_ms = clock_.NowMonotonicMs();
  if (e.info.state() == v1::WORKER_LOST) return;
  if (e.in_heard_order) {
    heard_order_.splice(heard_order_.end(), heard_order_, e.heard);
  } else {
    e.heard = heard_order_.insert(heard_order_.end(), e.info.name());
    e.in_heard_order = true;
  }
}

void WorkerRegistry::OnRegister(const v1::Register& reg) {
  Entry& e = workers_[reg.name()];
  // Leave the old state with the old slot count before the new one is written.
  if (e.info.state() != v1::WORKER_STATE_UNSPECIFIED) SetState(e, v1::WORKER_UNREACHABLE);
  e.info.set_name(reg.name());
  e.info.set_address(reg.address());
  e.info.set_hostname(reg.hostname());
  e.info.set_cores(reg.cores());
  e.info.mutable_gpus()->CopyFrom(reg.gpus());
  e.info.set_slots(reg.slots());
  e.info.set_version(reg.version());
  e.info.set_memory_bytes(reg.memory_bytes());
  e.info.mutable_gpu_devices()->CopyFrom(reg.gpu_devices());
  *e.info.mutable_labels() = reg.labels();
  *e.info.mutable_health() = reg.health();
  SetState(e, v1::WORKER_READY);
  Heard(e);
  e.info.set_last_heartbeat_unix_ms(clock_.NowUnixMs());
}

void WorkerRegistry::OnHeard(const std::string& name) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return;
  Heard(it->second);
  it->second.info.set_last_heartbeat_unix_ms(clock_.NowUnixMs());
}

void WorkerRegistry::OnDisconnect(const std::string& name) {
  auto it = workers_.find(name);
  if (it == workers_.end() || it->second.info.state() == v1::WORKER_LOST) return;
  SetState(it->second, v1::WORKER_UNREACHABLE);
}

void WorkerRegistry::Restore(const v1::WorkerInfo& info) {
  Entry& e = workers_[info.name()];
  const bool known = e.info.state() != v1::WORKER_STATE_UNSPECIFIED;
  if (known) SetState(e, v1::WORKER_UNREACHABLE);  // leaves its state with its old slots
  e.info = info;
  e.info.set_state(v1::WORKER_UNREACHABLE);
  if (!known) ++counts_[v1::WORKER_UNREACHABLE];
  e.info.clear_used_slots();
  e.info.clear_jobs();
  e.info.clear_health();  // said again when it registers; a stale one must not gate it
  e.info.clear_node_faults();
  Heard(e);
}

const v1::WorkerInfo* WorkerRegistry::SetDrained(const std::string& name, bool drained,
                                                 const std::string& by) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return nullptr;
  v1::WorkerInfo& info = it->second.info;
  if (info.drained() != drained) {
    info.set_drained(drained);
    info.set_drained_by(drained ? by : "");
    info.set_drained_unix_ms(drained ? clock_.NowUnixMs() : 0);
  }
  return &info;
}

bool WorkerRegistry::SetHealth(const std::string& name, const v1::WorkerHealth& health) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return false;
  v1::WorkerInfo& info = it->second.info;
  const bool before = HealthAllowsRanks(info.health());
  *info.mutable_health() = health;
  return before != HealthAllowsRanks(health);
}

const v1::WorkerInfo* WorkerRegistry::SetCordoned(const std::string& name, bool cordoned,
                                                  const std::string& reason,
                                                  const std::string& by) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return nullptr;
  v1::WorkerInfo& info = it->second.info;
  info.set_cordoned(cordoned);
  info.set_cordon_reason(cordoned ? reason : "");
  info.set_cordoned_by(cordoned ? by : "");
  info.set_cordoned_unix_ms(cordoned ? clock_.NowUnixMs() : 0);
  return &info;
}

bool WorkerRegistry::Forget(const std::string& name) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return false;
  Entry& e = it->second;
  const v1::WorkerState state = e.info.state();
  if (--counts_[state] == 0) counts_.erase(state);
  if (state == v1::WORKER_READY) ready_slots_ -= e.info.slots();
  if (e.in_heard_order) heard_order_.erase(e.heard);
  workers_.erase(it);
  return true;
}

std::vector<std::string> WorkerRegistry::ExpireLost() {
  std::vector<std::string> lost;
  const int64_t now = clock_.NowMonotonicMs();
  while (!heard_order_.empty()) {
    Entry& e = workers_.at(heard_order_.front());
    if (now - e.last_heard_mono_ms < worker_timeout_ms_) break;  // the rest were heard later
    lost.push_back(e.info.name());
    SetState(e, v1::WORKER_LOST);  // leaves heard_order_
  }
  return lost;
}

std::vector<const v1::WorkerInfo*> WorkerRegistry::Ready() const {
  std::vector<const v1::WorkerInfo*> out;
  for (const auto& [name, e] : workers_) {
    if (e.info.state() == v1::WORKER_READY) out.push_back(&e.info);
  }
  return out;
}

const v1::WorkerInfo* WorkerRegistry::Find(const std::string& name) const {
  auto it = workers_.find(name);
  return it == workers_.end() ? nullptr : &it->second.info;
}

bool WorkerRegistry::IsReady(const std::string& name) const {
  const v1::WorkerInfo* w = Find(name);
  return w != nullptr && w->state() == v1::WORKER_READY;
}

std::vector<v1::WorkerInfo> WorkerRegistry::List() const {
  std::vector<v1::WorkerInfo> out;
  out.reserve(workers_.size());
  for (const auto& [name, e] : workers_) out.push_back(e.info);
  return out;
}

std::vector<v1::WorkerInfo> WorkerRegistry::ListAfter(const std::string& after, size_t limit,
                                                      bool* more) const {
  std::vector<v1::WorkerInfo> out;
  auto it = after.empty() ? workers_.begin() : workers_.upper_bound(after);
  for (; it != workers_.end() && out.size() < limit; ++it) out.push_back(it->second.info);
  *more = it != workers_.end();
  return out;
}

}  // namespace convoy

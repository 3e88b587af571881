#include "coordinator/worker_registry.h"

namespace convoy {

void WorkerRegistry::OnRegister(const v1::Register& reg) {
  Entry& e = workers_[reg.name()];
  e.info.set_name(reg.name());
  e.info.set_address(reg.address());
  e.info.set_hostname(reg.hostname());
  e.info.set_cores(reg.cores());
  e.info.mutable_gpus()->CopyFrom(reg.gpus());
  e.info.set_slots(reg.slots());
  e.info.set_version(reg.version());
  e.info.set_state(v1::WORKER_READY);
  e.last_heard_mono_ms = clock_.NowMonotonicMs();
  e.info.set_last_heartbeat_unix_ms(clock_.NowUnixMs());
}

void WorkerRegistry::OnHeard(const std::string& name) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return;
  it->second.last_heard_mono_ms = clock_.NowMonotonicMs();
  it->second.info.set_last_heartbeat_unix_ms(clock_.NowUnixMs());
}

void WorkerRegistry::OnDisconnect(const std::string& name) {
  auto it = workers_.find(name);
  if (it == workers_.end() || it->second.info.state() == v1::WORKER_LOST) return;
  it->second.info.set_state(v1::WORKER_UNREACHABLE);
}

void WorkerRegistry::Restore(const v1::WorkerInfo& info) {
  Entry& e = workers_[info.name()];
  e.info = info;
  e.info.set_state(v1::WORKER_UNREACHABLE);
  e.info.clear_used_slots();
  e.info.clear_jobs();
  e.last_heard_mono_ms = clock_.NowMonotonicMs();
}

std::vector<std::string> WorkerRegistry::ExpireLost() {
  std::vector<std::string> lost;
  const int64_t now = clock_.NowMonotonicMs();
  for (auto& [name, e] : workers_) {
    if (e.info.state() == v1::WORKER_LOST) continue;
    if (now - e.last_heard_mono_ms >= worker_timeout_ms_) {
      e.info.set_state(v1::WORKER_LOST);
      lost.push_back(name);
    }
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
  for (const auto& [name, e] : workers_) out.push_back(e.info);
  return out;
}

}  // namespace convoy

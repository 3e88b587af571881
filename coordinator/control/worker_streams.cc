#include "coordinator/control/worker_streams.h"

namespace convoy {

std::shared_ptr<WorkerStream> WorkerStreamTable::Bind(const std::string& name,
                                                      std::shared_ptr<WorkerStream> stream) {
  MutexLock lock(mu_);
  std::shared_ptr<WorkerStream>& slot = streams_[name];
  std::shared_ptr<WorkerStream> replaced = slot != stream ? slot : nullptr;
  slot = std::move(stream);
  return replaced;
}

bool WorkerStreamTable::Unbind(const std::string& name, const WorkerStream* stream) {
  MutexLock lock(mu_);
  auto it = streams_.find(name);
  if (it == streams_.end() || it->second.get() != stream) return false;
  streams_.erase(it);
  return true;
}

std::shared_ptr<WorkerStream> WorkerStreamTable::Drop(const std::string& name) {
  MutexLock lock(mu_);
  auto it = streams_.find(name);
  if (it == streams_.end()) return nullptr;
  std::shared_ptr<WorkerStream> stream = std::move(it->second);
  streams_.erase(it);
  return stream;
}

std::shared_ptr<WorkerStream> WorkerStreamTable::Find(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = streams_.find(name);
  return it == streams_.end() ? nullptr : it->second;
}

std::map<std::string, std::shared_ptr<WorkerStream>> WorkerStreamTable::TakeAll() {
  MutexLock lock(mu_);
  std::map<std::string, std::shared_ptr<WorkerStream>> all;
  all.swap(streams_);
  return all;
}

bool WorkerStreamTable::Connected(const std::string& name) const {
  MutexLock lock(mu_);
  return streams_.count(name) > 0;
}

size_t WorkerStreamTable::size() const {
  MutexLock lock(mu_);
  return streams_.size();
}

}  // namespace convoy

#include "worker/supervise/attempt_table.h"

namespace convoy {

bool Attempt::AnyRunning() const {
  for (const auto& r : ranks) {
    if (r->running) return true;
  }
  return false;
}

std::string Attempt::label() const {
  return "job " + job_id + " attempt " + std::to_string(attempt);
}

MetricsSocket::RankOf Attempt::RankOfPeer() const {
  return [this](pid_t pid, pid_t pgid) {
    for (const auto& r : ranks) {
      if (r->pid > 0 && (r->pid == pid || r->pid == pgid)) return r->rank;
    }
    return -1;
  };
}

AttemptTable::AttemptTable() {
  MutexLock lock(mu_);
  published_ = std::make_shared<const AttemptSnapshot>();
}

Attempt* AttemptTable::Find(const Key& key) {
  auto it = attempts_.find(key);
  return it == attempts_.end() ? nullptr : &it->second;
}

const Attempt* AttemptTable::Find(const Key& key) const {
  auto it = attempts_.find(key);
  return it == attempts_.end() ? nullptr : &it->second;
}

Attempt& AttemptTable::Add(const Key& key) {
  dirty_ = true;
  Attempt& a = attempts_[key];
  a.job_id = key.job_id;
  a.job_uid = key.job_uid;
  a.attempt = key.attempt;
  return a;
}

AttemptTable::Map::iterator AttemptTable::Erase(Map::iterator it) {
  dirty_ = true;
  return attempts_.erase(it);
}

AttemptTable::Map::iterator AttemptTable::FindByNumber(const std::string& id, int attempt) {
  auto it = attempts_.lower_bound(Key{id, attempt, ""});
  if (it != attempts_.end() && it->first.job_id == id && it->first.attempt == attempt) return it;
  return attempts_.end();
}

bool AttemptTable::AnyRunning() const {
  for (const auto& [key, a] : attempts_) {
    if (a.AnyRunning()) return true;
  }
  return false;
}

uint64_t AttemptTable::NextEvent() {
  dirty_ = true;
  return ++seq_;
}

void AttemptTable::Publish() {
  if (!dirty_) return;
  dirty_ = false;
  auto snap = std::make_shared<AttemptSnapshot>();
  snap->seq = seq_;
  for (const auto& [key, a] : attempts_) {
    // A forgotten attempt is still reported while it runs: the coordinator must learn of it
    // (and kill it) rather than lose track of its processes.
    if (a.forgotten && !a.AnyRunning()) continue;
    v1::AttemptStatus& as = snap->attempts.emplace_back();
    as.set_job_id(a.job_id);
    as.set_job_uid(a.job_uid);
    as.set_attempt(a.attempt);
    for (const auto& r : a.ranks) {
      v1::RankStatus* rs = as.add_ranks();
      rs->set_rank(r->rank);
      rs->set_local_rank(r->local_rank);
      rs->set_pid(r->pid);
      rs->set_running(r->running);
      if (!r->running) *rs->mutable_exit() = r->exit;
    }
  }
  MutexLock lock(mu_);
  published_ = std::move(snap);
}

std::set<std::string> AttemptTable::SnapshotKeysOf(const std::string& id,
                                                   const std::string& uid) const {
  std::set<std::string> keys;
  for (const auto& [key, a] : attempts_) {
    if (SameJob(key, id, uid) && !a.snapshot_key.empty()) keys.insert(a.snapshot_key);
  }
  return keys;
}

std::shared_ptr<const AttemptSnapshot> AttemptTable::Published() const {
  MutexLock lock(mu_);
  return published_;
}

}  // namespace convoy

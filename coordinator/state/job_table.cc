#include "coordinator/state/job_table.h"

#include <cstdio>

#include "coordinator/state/job_state_machine.h"

namespace convoy {
namespace {

bool Waits(v1::JobState s) { return s == v1::PENDING || s == v1::RESTARTING; }

}  // namespace

std::string JobTable::NextId() const {
  char id[32];
  std::snprintf(id, sizeof(id), "j-%06lld", static_cast<long long>(next_number_));
  return id;
}

JobRecord& JobTable::Insert(v1::Job job, AttemptRuntime rt) {
  const std::string id = job.id();
  long long number = 0;
  if (std::sscanf(id.c_str(), "j-%lld", &number) == 1 && number >= next_number_) {
    next_number_ = number + 1;
  }
  JobRecord& r = records_.try_emplace(id, std::move(rt)).first->second;
  const v1::JobState state = job.state();
  if (!job.request_id().empty()) by_request_[{job.owner(), job.request_id()}] = id;
  r.job = std::move(job);
  SetState(id, v1::JOB_STATE_UNSPECIFIED, state);
  return r;
}

const JobRecord* JobTable::FindByRequest(const std::string& owner,
                                         const std::string& request_id) const {
  if (request_id.empty()) return nullptr;
  auto it = by_request_.find({owner, request_id});
  return it == by_request_.end() ? nullptr : Find(it->second);
}

JobRecord* JobTable::Find(const std::string& id) {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : &it->second;
}

const JobRecord* JobTable::Find(const std::string& id) const {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : &it->second;
}

JobRecord* JobTable::FindAttemptOf(const std::string& id, const std::string& uid) {
  JobRecord* r = Find(id);
  return r != nullptr && SameUid(uid, r->job.uid()) ? r : nullptr;
}

void JobTable::SetState(const std::string& id, v1::JobState from, v1::JobState to) {
  JobRecord& r = records_.at(id);
  const std::string& owner = r.job.owner();
  if (from != v1::JOB_STATE_UNSPECIFIED) {
    if (--by_state_[from] == 0) by_state_.erase(from);
    auto it = by_owner_.find({owner, from});
    if (it != by_owner_.end() && --it->second == 0) by_owner_.erase(it);
  }
  ++by_state_[to];
  ++by_owner_[{owner, to}];
  if (IsTerminal(to)) {
    active_.erase(id);
  } else {
    active_.insert(id);
  }
  // A sweep (JobSpec.sweep) is never placed: its trials wait, it does not.
  if (Waits(to) && !r.job.spec().has_sweep()) {
    r.waiting_since_mono_ms = clock_.NowMonotonicMs();
    waiting_.insert(id);
  } else {
    waiting_.erase(id);
  }
}

void JobTable::Attach(JobRecord& r, AttemptRuntime rt) {
  rt.ranks_by_worker.clear();
  rt.started_count = 0;
  rt.gone_count = 0;
  for (const auto& [rank, rr] : rt.ranks) {
    rt.ranks_by_worker[rr.worker].push_back(rank);
    if (rr.started) ++rt.started_count;
    if (rr.gone) ++rt.gone_count;
    jobs_on_[rr.worker].insert(r.job.id());
  }
  r.rt = std::move(rt);
  attached_.insert(r.job.id());
}

void JobTable::Detach(JobRecord& r) {
  AttemptRuntime& rt = r.rt;
  for (const auto& [worker, ranks] : rt.ranks_by_worker) {
    auto it = jobs_on_.find(worker);
    if (it != jobs_on_.end()) {
      it->second.erase(r.job.id());
      if (it->second.empty()) jobs_on_.erase(it);
    }
  }
  rt.ranks.clear();
  rt.ranks_by_worker.clear();
  rt.awaiting.clear();
  rt.failures.Clear();
  attached_.erase(r.job.id());
}

void JobTable::Erase(const std::string& id) {
  auto it = records_.find(id);
  if (it == records_.end()) return;
  if (attached_.count(id) > 0) Detach(it->second);
  const v1::JobState state = it->second.job.state();
  if (--by_state_[state] == 0) by_state_.erase(state);
  auto owned = by_owner_.find({it->second.job.owner(), state});
  if (owned != by_owner_.end() && --owned->second == 0) by_owner_.erase(owned);
  if (!it->second.job.request_id().empty()) {
    by_request_.erase({it->second.job.owner(), it->second.job.request_id()});
  }
  active_.erase(id);
  waiting_.erase(id);
  dirty_.erase(id);
  history_dirty_.erase(id);
  records_.erase(it);
}

std::vector<std::string> JobTable::JobsOn(const std::string& worker) const {
  auto it = jobs_on_.find(worker);
  if (it == jobs_on_.end()) return {};
  return std::vector<std::string>(it->second.begin(), it->second.end());
}

}  // namespace convoy

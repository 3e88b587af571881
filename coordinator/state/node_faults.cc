#include "coordinator/state/node_faults.h"

#include <set>

namespace convoy {
namespace {

// "10m", "90s", "2h": the window as the flag takes it.
std::string Span(int64_t ms) {
  const int64_t s = ms / 1000;
  if (s % 3600 == 0 && s > 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0 && s > 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

}  // namespace

void NodeFaultTracker::Expire(std::deque<v1::NodeFault>& q) const {
  const int64_t now = clock_.NowUnixMs();
  while (!q.empty() &&
         (now - q.front().time_unix_ms() > options_.window_ms || q.size() > kMaxFaultsPerNode)) {
    q.pop_front();
  }
}

std::optional<std::string> NodeFaultTracker::Record(const std::string& worker,
                                                    v1::NodeFault fault) {
  fault.set_time_unix_ms(clock_.NowUnixMs());
  std::deque<v1::NodeFault>& q = faults_[worker];
  q.push_back(std::move(fault));
  Expire(q);
  if (options_.jobs_to_cordon <= 0) return std::nullopt;
  // The newest fault of each job, in the order the jobs first failed here.
  std::set<std::string> seen;
  std::vector<const v1::NodeFault*> per_job;
  for (auto it = q.rbegin(); it != q.rend(); ++it) {
    if (seen.insert(it->job_id()).second) per_job.insert(per_job.begin(), &*it);
  }
  if (static_cast<int>(per_job.size()) < options_.jobs_to_cordon) return std::nullopt;
  std::string why = "ranks of " + std::to_string(per_job.size()) +
                    " jobs failed here for the node's reasons within " + Span(options_.window_ms) +
                    ": ";
  for (size_t i = 0; i < per_job.size(); ++i) {
    why += (i == 0 ? "" : ", ") + per_job[i]->job_id() + " (" + per_job[i]->reason() + ")";
  }
  return why;
}

std::vector<v1::NodeFault> NodeFaultTracker::Faults(const std::string& worker) const {
  std::vector<v1::NodeFault> out;
  auto it = faults_.find(worker);
  if (it == faults_.end()) return out;
  const int64_t now = clock_.NowUnixMs();
  for (const v1::NodeFault& f : it->second) {
    if (now - f.time_unix_ms() <= options_.window_ms) out.push_back(f);
  }
  return out;
}

}  // namespace convoy

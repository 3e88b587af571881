#include "coordinator/state/dependency_graph.h"

#include <algorithm>

#include "spec/dependency_spec.h"

namespace convoy {

DependencyVerdict Judge(v1::DependencyCondition when, v1::JobState state) {
  const bool succeeded = state == v1::SUCCEEDED;
  const bool failed = state == v1::FAILED || state == v1::CANCELLED;
  if (!succeeded && !failed) return DependencyVerdict::kWaiting;
  switch (when) {
    case v1::DEPENDENCY_ENDED:
      return DependencyVerdict::kMet;
    case v1::DEPENDENCY_FAILED:
      return failed ? DependencyVerdict::kMet : DependencyVerdict::kNever;
    default:  // succeeded, and UNSPECIFIED read as it
      return succeeded ? DependencyVerdict::kMet : DependencyVerdict::kNever;
  }
}

namespace {

std::string Needed(const v1::JobDependency& d) {
  switch (ConditionOf(d)) {
    case v1::DEPENDENCY_FAILED:
      return "to fail";
    case v1::DEPENDENCY_ENDED:
      return "to end";
    default:
      return "to succeed";
  }
}

}  // namespace

std::string NeverReason(const v1::JobDependency& d, v1::JobState state) {
  return "dependency " + d.job_id() + " ended " + v1::JobState_Name(state) +
         "; this job needed it " + Needed(d) + " (after: " + d.job_id() +
         ", when: " + ConditionWord(ConditionOf(d)) + ")";
}

std::string DeletedReason(const v1::JobDependency& d) {
  return "dependency " + d.job_id() + " was deleted; this job needed it " + Needed(d) +
         " (after: " + d.job_id() + ", when: " + ConditionWord(ConditionOf(d)) + ")";
}

std::string WaitingReason(const std::vector<v1::JobDependency>& unmet) {
  std::string out;
  for (size_t i = 0; i < unmet.size(); ++i) {
    out += (i == 0 ? "waiting for " : i + 1 == unmet.size() ? " and " : ", ") + WaitText(unmet[i]);
  }
  return out;
}

void DependencyGraph::Add(const std::string& job, const std::string& dependency) {
  waits_for_[job].insert(dependency);
  dependants_[dependency].insert(job);
}

bool DependencyGraph::Remove(const std::string& job, const std::string& dependency) {
  auto w = waits_for_.find(job);
  if (w == waits_for_.end() || w->second.erase(dependency) == 0) return false;
  if (w->second.empty()) waits_for_.erase(w);
  auto d = dependants_.find(dependency);
  if (d != dependants_.end()) {
    d->second.erase(job);
    if (d->second.empty()) dependants_.erase(d);
  }
  return true;
}

void DependencyGraph::DropWaits(const std::string& job) {
  auto w = waits_for_.find(job);
  if (w == waits_for_.end()) return;
  for (const std::string& dep : w->second) {
    auto d = dependants_.find(dep);
    if (d == dependants_.end()) continue;
    d->second.erase(job);
    if (d->second.empty()) dependants_.erase(d);
  }
  waits_for_.erase(w);
}

void DependencyGraph::Erase(const std::string& job) {
  DropWaits(job);
  if (auto d = dependants_.find(job); d != dependants_.end()) {
    for (const std::string& waiter : d->second) {
      auto w = waits_for_.find(waiter);
      if (w == waits_for_.end()) continue;
      w->second.erase(job);
      if (w->second.empty()) waits_for_.erase(w);
    }
    dependants_.erase(d);
  }
}

const DependencyGraph::IdSet& DependencyGraph::WaitsFor(const std::string& job) const {
  static const IdSet kNone;
  auto it = waits_for_.find(job);
  return it == waits_for_.end() ? kNone : it->second;
}

const DependencyGraph::IdSet& DependencyGraph::Dependants(const std::string& job) const {
  static const IdSet kNone;
  auto it = dependants_.find(job);
  return it == dependants_.end() ? kNone : it->second;
}

std::vector<std::string> DependencyGraph::TransitiveDependants(
    const std::string& job, const std::function<bool(const std::string&)>& follow) const {
  IdSet seen;
  std::vector<std::string> todo = {job};
  while (!todo.empty()) {
    const std::string next = std::move(todo.back());
    todo.pop_back();
    for (const std::string& d : Dependants(next)) {
      if (d == job || (follow && !follow(d))) continue;
      if (seen.insert(d).second) todo.push_back(d);
    }
  }
  return std::vector<std::string>(seen.rbegin(), seen.rend());
}

std::optional<std::string> DependencyGraph::CycleThrough(
    const std::string& job, const std::vector<std::string>& dependencies) const {
  // Depth-first from each dependency along "waits for" edges; reaching `job` closes a cycle.
  // `parent` remembers how each job was reached, to name the path.
  std::map<std::string, std::string, JobIdLess> parent;
  for (const std::string& start : dependencies) {
    if (start == job) return job + " -> " + job;
    if (parent.count(start)) continue;
    parent[start] = job;
    std::vector<std::string> stack = {start};
    while (!stack.empty()) {
      const std::string at = std::move(stack.back());
      stack.pop_back();
      for (const std::string& next : WaitsFor(at)) {
        if (next == job) {
          std::vector<std::string> path = {job, at};
          for (std::string p = parent[at]; p != job; p = parent[p]) path.push_back(p);
          std::string out = job;
          for (auto it = path.rbegin(); it != path.rend(); ++it) out += " -> " + *it;
          return out;
        }
        if (parent.emplace(next, at).second) stack.push_back(next);
      }
    }
  }
  return std::nullopt;
}

}  // namespace convoy

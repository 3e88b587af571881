// Dependencies between jobs (README "Sweeps, dependencies and checkpoints"): the pure part.
// What a dependency's condition makes of the state of the job it names (Judge), the words a
// waiting or failed job is given, and DependencyGraph, the unmet edges with both indexes:
// each waiting job's unmet dependencies, and each job's waiting dependants, so that the end
// of a job resolves its dependants in O(dependants) and a cascade walks only real edges.
//
// Plain C++ over the protos; no clock, no store. The coordinator's Dependencies controller
// (coordinator/control/dependencies.h) owns one graph and keeps it in step with the table.
// Threading: none of its own; callers hold the Coordinator's lock.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"
#include "coordinator/state/list_query.h"  // JobIdLess

namespace convoy {

// Where a dependency stands, given the state of the job it names.
enum class DependencyVerdict {
  kWaiting,  // that job has not ended yet
  kMet,      // it ended the way asked for
  kNever,    // it ended the other way: the condition can never hold
};
DependencyVerdict Judge(v1::DependencyCondition when, v1::JobState state);

// Why a waiting job fails, naming the dependency and the condition:
// "dependency j-000004 ended FAILED; this job needed it to succeed (after: j-000004)".
std::string NeverReason(const v1::JobDependency& dependency, v1::JobState state);
// The same for a dependency that is no longer kept (deleted, by hand or by retention).
std::string DeletedReason(const v1::JobDependency& dependency);
// "waiting for j-000004 to succeed and j-000005 to end" (empty for no dependency).
std::string WaitingReason(const std::vector<v1::JobDependency>& unmet);

// The unmet edges "job waits for dependency". Ids order as JobIdLess (submission order).
class DependencyGraph {
 public:
  using IdSet = std::set<std::string, JobIdLess>;

  // `job` waits for `dependency` (again: no effect).
  void Add(const std::string& job, const std::string& dependency);
  // The edge is met or dropped; true when it was there.
  bool Remove(const std::string& job, const std::string& dependency);
  // The edges of `job` to what it waits for (it no longer waits: it failed, or ended).
  void DropWaits(const std::string& job);
  // Every edge of `job`, both ways (it ended and its dependants were judged, or was deleted).
  void Erase(const std::string& job);

  // Whether `job` still waits for any dependency. O(log jobs).
  bool Waits(const std::string& job) const { return waits_for_.count(job) != 0; }
  // The dependencies `job` still waits for (empty when none).
  const IdSet& WaitsFor(const std::string& job) const;
  // The jobs that wait for `job` (empty when none). O(log jobs).
  const IdSet& Dependants(const std::string& job) const;
  // Every job that waits for `job`, directly or through others that `follow` accepts (null:
  // all), newest first: an order in which each job comes before every job it waits for (a
  // dependant is always submitted after what it names). O(the jobs reached + their edges).
  std::vector<std::string> TransitiveDependants(
      const std::string& job,
      const std::function<bool(const std::string&)>& follow = nullptr) const;

  // A path that the edges `job` -> each of `dependencies` would close into a cycle, as the
  // ids along it ("j-000002 -> j-000003 -> j-000002"); nullopt when they close none. Adding
  // them is then safe. O(the jobs reachable from `dependencies` + their edges).
  std::optional<std::string> CycleThrough(const std::string& job,
                                          const std::vector<std::string>& dependencies) const;

  size_t waiting_jobs() const { return waits_for_.size(); }

 private:
  std::map<std::string, IdSet, JobIdLess> waits_for_;   // job -> its unmet dependencies
  std::map<std::string, IdSet, JobIdLess> dependants_;  // dependency -> jobs waiting for it
};

}  // namespace convoy

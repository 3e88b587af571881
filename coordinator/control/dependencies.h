// Dependencies between jobs (README "Sweeps, dependencies and checkpoints", "Dependencies";
// the spec's `after`, spec/dependency_spec.h). One of the JobManager's controllers.
//
// What it guarantees:
//   - At submit, every job `after` names exists here (every job is readable by whoever may
//     submit: GetJob shows any job, redacted), and the edges close no cycle; else
//     INVALID_ARGUMENT naming `after[i].job`. Ids are given at submit, in order, so a job can
//     only name jobs submitted before it: an id not yet given (the job's own included) is
//     refused as one that does not exist, which is what keeps the graph acyclic; the graph's
//     own cycle check (DependencyGraph::CycleThrough) stands behind it.
//   - A PENDING job with an unmet dependency is never placed (Blocks, asked by the scheduling
//     pass). Its Job.waiting_for lists the unmet ones and its pending_reason says "waiting for
//     j-000004 to succeed"; both are persisted with the job.
//   - When a job ends (OnEnded, from JobManager's transition hook), each dependant waiting for
//     it is judged at once, in O(its dependants): met (the edge goes; with none left the job
//     is scheduled like any other, and written so that a restart knows), or never (the job
//     FAILS with the reason naming the dependency and the condition, and its own dependants
//     are judged in turn, iteratively: a chain of any length is no recursion). A dependency
//     already ended at submit is judged the same way: the job fails at once, or never waits.
//   - A deleted job's waiting dependants fail ("was deleted"); so do those whose dependency
//     is gone from the store when the coordinator restarts (Recover).
//   - Recover rebuilds the graph from each job's persisted waiting_for and the states of the
//     jobs it names: the same with SQLite or etcd, since both keep the whole Job.
//   - Cancel with cascade (UnfinishedDependants): the jobs waiting on a job, transitively,
//     newest first, so that each is cancelled before what it waits for ends and judges it.
//
// No I/O of its own: writes go through JobWriter into the write-behind store.
// Threading: none of its own; called with the Coordinator's lock held.
// Cost: O(dependants) per ended job, O(after) per submit; nothing per tick.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/job.pb.h"
#include "coordinator/control/job_writer.h"
#include "coordinator/state/dependency_graph.h"
#include "coordinator/state/job_table.h"

namespace convoy {

class Dependencies {
 public:
  // `on_unblocked(id)`: job `id`'s last dependency was met (the owner asks for a scheduling
  // pass, and wakes a sweep so that it makes its trials).
  Dependencies(JobTable& table, JobWriter& writer,
               std::function<void(const std::string&)> on_unblocked)
      : table_(table), writer_(writer), on_unblocked_(std::move(on_unblocked)) {}

  // OK when every `after[i].job` of `spec` names a job kept here and the job about to get id
  // `next_id` would close no cycle; else INVALID_ARGUMENT naming the field.
  Status CheckAtSubmit(const v1::JobSpec& spec, const std::string& next_id) const;
  // Before a new job's first write: sets its waiting_for (the dependencies not met yet) and
  // pending_reason. Returns why it can never start (a dependency already ended the other
  // way), or "".
  std::string Prepare(v1::Job& job) const;
  // After the job was inserted in the table: indexes its unmet dependencies, or fails it at
  // once with `never` (Prepare's) when that is not empty.
  void Track(JobRecord& r, const std::string& never);

  // Whether job `id` waits for a dependency (the scheduling pass skips it).
  bool Blocks(const std::string& id) const { return graph_.Waits(id) || doomed_.count(id) != 0; }
  // Job `id` reached a terminal state: its dependants are judged, and its own edges dropped.
  void OnEnded(const std::string& id);
  // Job `id` is being deleted: whatever still waits for it fails.
  void OnDeleted(const std::string& id);
  // After JobManager::Recover loaded every job: rebuilds the graph, failing the jobs whose
  // dependency ended the other way or is gone.
  void Recover();

  // The unfinished jobs waiting on `id`, directly or in turn, through jobs `follow` accepts
  // (null: all), newest first.
  std::vector<std::string> UnfinishedDependants(
      const std::string& id, const std::function<bool(const JobRecord&)>& follow) const;
  // cancel --cascade, before `root` itself is cancelled: cancels every unfinished job of
  // root's owner that waits on it, directly or through such jobs, newest first, each with
  // `why` and the job it waited on. Jobs of other owners are neither cancelled nor followed:
  // they fail or run by their own condition when root ends. A waiting job was never placed,
  // so it holds nothing to stop. Returns the ids cancelled, for root's event ("" when none):
  // "j-000005, j-000006" (the first kMaxNamed, then how many more).
  std::string CancelDependants(const JobRecord& root, const std::string& why);
  static constexpr int kMaxNamed = 10;

  const DependencyGraph& graph() const { return graph_; }

 private:
  // Judges the dependants of ended job `id` (the worklist's step).
  void Resolve(const std::string& id);
  // Fails waiting job `id` with `reason`; its own dependants are judged in turn.
  void Fail(const std::string& id, const std::string& reason);
  // Rewrites the job's waiting_for and pending_reason from the graph.
  void Refresh(JobRecord& r);

  JobTable& table_;
  JobWriter& writer_;
  const std::function<void(const std::string&)> on_unblocked_;
  DependencyGraph graph_;
  // Jobs that must fail but whose failing write did not go through: kept from placement
  // until a restart judges them again.
  std::map<std::string, std::string> doomed_;
  // Ended jobs whose dependants are yet to be judged, and whether a loop is draining them.
  std::deque<std::string> ended_;
  bool draining_ = false;
};

}  // namespace convoy

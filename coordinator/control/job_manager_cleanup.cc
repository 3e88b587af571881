// JobManager: deleting finished jobs (DeleteJob and --job-retention,
// coordinator/control/retention.h), and the removal of their files on the workers that ran them
// (coordinator/control/file_deletions.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "coordinator/control/job_manager.h"
#include "coordinator/state/job_state_machine.h"

namespace convoy {

StatusOr<std::vector<std::string>> JobManager::Delete(const std::string& id,
                                                      const std::string& by) {
  JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  const v1::JobState state = r->job.state();
  if (!IsTerminal(state)) {
    return Status::FailedPrecondition("job " + id + " is " + StateName(state) +
                                      ": cancel it first (convoy cancel " + id +
                                      "), then delete it");
  }
  if (r->rt.attempt >= 0 && !r->rt.released) {
    return Status::FailedPrecondition(
        "job " + id + " is " + StateName(state) + " but the ranks of its attempt " +
        std::to_string(r->rt.attempt) + " are still being stopped; try again in a few seconds");
  }
  const std::string uid = r->job.uid();
  std::set<std::string> workers;
  for (const v1::Attempt& a : r->job.attempts()) {
    for (const v1::NodeAssignment& n : a.nodes()) workers.insert(n.worker());
  }
  std::vector<std::string> trials;  // a sweep's go with it (each deleted as a job)
  for (const v1::TrialSummary& t : r->job.sweep().trials()) {
    if (!t.job_id().empty()) trials.push_back(t.job_id());
  }
  Status st = store_.DeleteJob(id);
  if (!st.ok()) return Status::Unavailable("cannot delete job " + id + ": " + st.message());
  deletions_.Request(workers, id, uid);
  deps_.OnDeleted(id);  // whatever still waits for it fails
  // Out of every index (a finished, released job is in none but these).
  table_.Erase(id);
  sweeps_.OnDeleted(id);
  for (const std::string& trial : trials) {
    const JobRecord* t = table_.Find(trial);
    if (t == nullptr || t->job.sweep_id() != id) continue;
    auto gone = Delete(trial, by);
    if (!gone.ok())
      spdlog::warn("sweep {}: trial {} not deleted: {}", id, trial, gone.status().message());
  }
  ReleaseIdentityOf(uid);  // now, or when the last worker has removed its files
  spdlog::info("job {} ({}) deleted{}; {} worker(s) told to remove its files", id, StateName(state),
               by.empty() ? "" : " by " + by, workers.size());
  return std::vector<std::string>(workers.begin(), workers.end());
}

std::vector<FileDeletion> JobManager::PendingFileDeletions() const { return deletions_.List(); }

void JobManager::OnJobFilesDeleted(const std::string& worker, const v1::JobFilesDeleted& msg) {
  const std::optional<std::string> uid = deletions_.OnAnswer(worker, msg);
  if (!uid) return;
  // Unless the job still exists (not deleted: an attempt's files only): by id, then uid.
  const JobRecord* r = table_.Find(msg.job_id());
  if (r == nullptr || r->job.uid() != *uid) ReleaseIdentityOf(*uid);
}

void JobManager::ApplyRetention() {
  const std::vector<std::string> due = retention_.Due(table_);
  size_t deleted = 0;
  for (const std::string& id : due) deleted += Delete(id, "retention").ok() ? 1 : 0;
  if (deleted == Retention::kBatch) retention_.LookAgainSoon();  // more at the next tick
}

}  // namespace convoy

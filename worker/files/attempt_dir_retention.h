// convoy-worker --attempt-dir-retention: removes the directory of a finished attempt
// (<work_dir>/jobs/<job id>/attempt-N: its rank logs and error files) once the attempt ended
// that long ago, so that a worker that runs many jobs does not fill its disk with logs
// nobody reads. What is left of the job (its job directory under --job-root: checkpoints,
// code) goes when the job is deleted (DeleteJob, the coordinator's --job-retention).
//
// "Ended" is the newest modification time of the attempt directory and the files in it (a
// rank's log is written until the rank exits), so it needs no state and survives a worker
// restart. An attempt with a rank that runs (Supervisor::RankSamples) is never touched; one
// launched a moment ago is too new to be old. In place of the directory a tombstone
// <work_dir>/jobs/<job id>/attempt-N.removed is left (empty; removed with the job), so that
// `convoy logs` can say the logs were removed rather than that there are none.
//
// Threading: Sweep runs on the caller's thread; Start runs it every interval on a thread of
// its own until Stop (or the destructor). The running-set callback must be callable from
// that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/mutex.h"

namespace convoy {

// The tombstone left for a removed attempt directory.
std::string AttemptTombstonePath(const std::string& work_dir, const std::string& job_id,
                                 int attempt);

class AttemptDirRetention {
 public:
  // (job id, attempt) of every attempt with a rank that still runs.
  using RunningFn = std::function<std::set<std::pair<std::string, int>>()>;

  // `retention_ms` > 0; `clock` gives the time compared with the files' (wall clock).
  AttemptDirRetention(std::string work_dir, int64_t retention_ms, const Clock& clock,
                      RunningFn running);
  ~AttemptDirRetention();
  AttemptDirRetention(const AttemptDirRetention&) = delete;
  AttemptDirRetention& operator=(const AttemptDirRetention&) = delete;

  // One pass over <work_dir>/jobs: removes every attempt directory that ended more than the
  // retention ago and does not run, without following symlinks (worker/files/file_removal.h).
  // Returns how many it removed. Not concurrently with itself.
  int Sweep();

  // Sweeps now and then every `interval_ms` until Stop. Call once.
  void Start(int64_t interval_ms);
  // Ends the thread (waits for a sweep in progress). Idempotent.
  void Stop() EXCLUDES(mu_);

 private:
  const std::string work_dir_;
  const int64_t retention_ms_;
  const Clock& clock_;
  const RunningFn running_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace convoy

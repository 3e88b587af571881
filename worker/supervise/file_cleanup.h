// Removing what jobs leave on this worker: a deleted job's files (DeleteJobFiles: its attempt
// directories under --work-dir/jobs, its job directory under --job-root, its snapshot
// directories, and its identity with what its uid left in /tmp), the snapshots of a finished
// job once no rank of it runs here (JobFinished), those that no job of the cluster owns
// (RegisterAck), and those of jobs idle here for kSnapshotIdleMs.
//
// The removals of trees (a job directory with its checkpoints, a snapshot directory) run on
// the files thread (worker/supervise/off_loop.h), never on the loop: the answer to
// DeleteJobFiles (JobFilesDeleted) goes once they are done, as a command back to the loop.
// What to keep is decided on the loop, which owns the attempts. The hourly expiry of idle
// snapshots stays on the loop: it removes only what has been idle for an hour, and a launch
// that comes meanwhile must find its directory as it left it.
//
// Threading: the supervisor thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "convoy/v1/worker.pb.h"
#include "worker/supervise/attempt_table.h"
#include "worker/supervise/off_loop.h"
#include "worker/supervise/reporter.h"
#include "worker/supervise/worker_config.h"

namespace convoy {

class FileCleanup {
 public:
  // Runs `then` on the supervisor thread, as a command (Supervisor::ToLoop).
  using ToLoop = std::function<void(std::function<void()> then)>;

  FileCleanup(const WorkerConfig& config, AttemptTable& table, Reporter& reporter,
              OffLoop& files_thread, ToLoop to_loop);

  // Removes a deleted job's files, keeping those of an attempt that still runs (the job's
  // directory stays then too: the coordinator asks again later), and answers JobFilesDeleted
  // once they are gone. A request for a job whose removal is under way is answered by that
  // one.
  void DeleteJobFiles(const v1::DeleteJobFiles& req);
  // The job finished: its snapshots go once no rank of it runs here any more (a rank still
  // stopping may be writing one: it must not find its directory gone).
  void JobFinished(const v1::JobFinished& req);
  // Removes the snapshot directories of `keys` that no running attempt here uses.
  void RemoveStaleSnapshots(const std::vector<std::string>& keys);
  // Each turn: the snapshots of finished jobs whose ranks here have all exited, and once a
  // minute those of jobs that have not run here for kSnapshotIdleMs.
  void Tick(int64_t now_ms);

 private:
  // The removal of a deleted job's files, on the files thread; answers on the loop.
  struct Deletion {
    std::string id;
    std::string uid;
    std::string name;                 // JobDirName
    std::set<std::string> keep;       // attempt directories of attempts that still run
    std::set<std::string> snapshots;  // snapshot keys to remove (none while any runs)
    std::optional<uid_t> identity;    // its uid, released once its files are gone
  };
  void Remove(const Deletion& d);
  void Removed(const Deletion& d, int64_t removed, const std::string& error);
  void RemoveFinishedJobsSnapshots();

  const WorkerConfig& config_;
  AttemptTable& table_;
  Reporter& reporter_;
  OffLoop& files_thread_;
  const ToLoop to_loop_;
  // Deletions under way on the files thread: (job id, uid).
  std::set<std::pair<std::string, std::string>> deleting_;
  // Jobs that finished while ranks of theirs were still stopping here: their snapshot
  // directories go when the last of those ranks has exited. Job id -> snapshot keys (the
  // JobFinished message's and its attempts').
  std::map<std::string, std::set<std::string>> finished_with_snapshots_;
  int64_t next_expiry_ms_ = 0;
};

}  // namespace convoy

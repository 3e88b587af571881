// The per-host data cache of the ranks (trainer/data_cache.h): one private directory per
// run-as user under the worker's work dir, passed to every rank as CONVOY_CACHE_DIR.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"
#include "worker/process_launcher.h"

namespace convoy {

// Makes `<work_dir>/data-cache` (0711, the worker's: others may pass through, not list) and
// in it `<uid>` for the user the ranks run as (`user`, else the worker's own user): 0700 and
// owned by that user, so that ranks of one user never read or write another user's cache.
// Neither may be a symlink; an existing one is tightened to these modes and owners. Returns
// the per-user directory, or why it cannot be made (the ranks then run without a cache).
// Called once at start, from main.
StatusOr<std::string> PrepareDataCacheDir(const std::string& work_dir,
                                          const std::optional<RunAsUser>& user);

// Removes what ranks were writing into the data cache when they died with an earlier run of
// this worker (`kill -9` of the worker: their own exits were never seen): every
// `<entry>.tmp.<pid>` and `<entry>.meta.tmp.<pid>` (trainer/data_cache.cc) under
// `<work_dir>/data-cache/<uid>/` whose writer no longer exists. Returns how many went.
// Called at start; a writer still alive (the cache filler) keeps its file.
int RemoveDeadWritersCacheTemporaries(const std::string& work_dir);

// Runs `<trainer_path> --fill-data-cache` once, in the background, as the ranks' user with
// CONVOY_CACHE_DIR=`cache_dir`, so that the first rank on this host finds the default data
// set decompressed (a rank that starts meanwhile waits for it on the entry's lock instead
// of decompressing a second copy). Its output goes to the worker's log. Start returns at
// once, null when the trainer is not there (a worker for commands only). Destroying the
// filler kills the process if it still runs (its group, SIGKILL) and waits for its thread:
// nothing of it outlives the daemon that owns it. The process also dies with the worker
// (PR_SET_PDEATHSIG).
class DataCacheFiller {
 public:
  static std::unique_ptr<DataCacheFiller> Start(const std::string& trainer_path,
                                                const std::string& cache_dir,
                                                const std::optional<RunAsUser>& user,
                                                std::map<std::string, std::string> env);
  ~DataCacheFiller();
  DataCacheFiller(const DataCacheFiller&) = delete;
  DataCacheFiller& operator=(const DataCacheFiller&) = delete;

 private:
  DataCacheFiller() = default;
  void Run(const std::string& trainer_path, const std::string& cache_dir,
           const std::optional<RunAsUser>& user, std::map<std::string, std::string> env);

  // The filler's process (group) from its start until it is reaped (never a pid reused
  // since: the reap and the reset happen under the lock the destructor's kill takes).
  Mutex mu_;
  pid_t pid_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace convoy

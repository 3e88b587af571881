// The worker's data cache (common/data_cache.h, issue 45): `<work_dir>/data-cache/shared`,
// owned by the worker (0711: ranks open entries by name, nobody else lists or writes), filled
// by the worker on a thread of its own and read by every rank of every job through
// CONVOY_CACHE_DIR. A job's ranks never write it, so no job can change what another reads,
// and every job's first start is warm whatever identity it runs as: the cold fill happens
// once per worker and data set version (at start for --prefill-data, else at the first
// launch that reads the data set).
//
// What is cached: the files the built-in trainer reads (common/rank_contract.h DataFiles) of a
// data directory under one of `roots` (the trainer's default data directory and the
// worker's --data-path roots, which jobs cannot write). A job's own data, in its own
// directory, is read by its ranks directly.
//
// Threading: Ensure from one thread at a time (the supervisor's, or main before it starts);
// the fills run on the cache's own thread. Ensure never decompresses: it looks at a few
// file attributes and, for an entry that is missing or stale, takes the entry's lock before
// it returns (so a rank started afterwards waits for the fill instead of decompressing a
// copy of its own) and queues the fill.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/data_cache.h"
#include "common/mutex.h"
#include "common/status.h"

namespace convoy {

class WorkerDataCache {
 public:
  // Makes the cache directory under `work_dir` (and removes the per-user caches that earlier
  // versions kept beside it, `<work_dir>/data-cache/<uid>`), and starts the filling thread.
  // `roots`: canonical directories whose data sets may be cached.
  static StatusOr<std::unique_ptr<WorkerDataCache>> Open(const std::string& work_dir,
                                                         std::vector<std::string> roots);
  // Waits for the fill in hand; drops what is still queued (its locks are released).
  ~WorkerDataCache();
  WorkerDataCache(const WorkerDataCache&) = delete;
  WorkerDataCache& operator=(const WorkerDataCache&) = delete;

  // The directory the ranks get as CONVOY_CACHE_DIR.
  const std::string& dir() const { return dir_; }

  // Queues the fill of the trainer's data files in `data_dir` (empty: the trainer's default)
  // when it lies under a root and an entry is missing or stale. Returns how many fills it
  // queued. See the threading note above.
  int Ensure(const std::string& data_dir) EXCLUDES(mu_);

  // Fills done and failed so far (tests, logs). Any thread.
  struct Counts {
    int64_t filled = 0;
    int64_t failed = 0;
  };
  Counts counts() EXCLUDES(mu_);
  // Waits until nothing is queued or being filled (tests, the prefill's log line).
  void WaitIdle() EXCLUDES(mu_);

 private:
  WorkerDataCache(std::string dir, std::vector<std::string> roots)
      : dir_(std::move(dir)), roots_(std::move(roots)) {}
  void Loop() EXCLUDES(mu_);

  struct Fill {
    std::string file;
    EntryLock lock;
  };
  const std::string dir_;
  const std::vector<std::string> roots_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Fill> queue_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  Counts counts_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace convoy

// The worker's data cache (common/data_cache.h, issue 45): `<work_dir>/data-cache/shared`,
// owned by the worker (0711: ranks open entries by name, nobody else lists or writes), filled
// by the worker on a thread of its own and read by every rank of every job through
// CONVOY_CACHE_DIR. A job's ranks never write it, so no job can change what another reads,
// and every job's first start is warm whatever identity it runs as: the cold fill happens
// once per worker and data set version (at start for --prefill-data, else at the first
// launch that reads the data set).
//
// What is cached: the files the built-in trainer reads (common/rank_contract.h DataFiles).
// - Of a data directory under one of `roots` (the trainer's default data directory and the
//   worker's --data-path roots, which jobs cannot write): entries keyed by the file's path,
//   checked against its size and time.
// - Of any other (a job's own data, shipped in its code archive or written by it): entries
//   keyed by the SHA-256 of the file's bytes (common/data_cache.h, content entries), filled
//   from a private copy of what was hashed, so a job can make the worker cache only the true
//   decompression of bytes it holds. The same data shipped by many jobs is decompressed once.
//   Their total is kept under `max_content_bytes`, the least recently used removed first. What
//   each file hashed to is recorded with its version (RecordedSha256): its ranks, and its next
//   launches, do not hash it again while it is unchanged.
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
  static StatusOr<std::unique_ptr<WorkerDataCache>> Open(
      const std::string& work_dir, std::vector<std::string> roots,
      int64_t max_content_bytes = kDefaultMaxContentBytes);
  static constexpr int64_t kDefaultMaxContentBytes = int64_t{4} << 30;
  // Waits for the fill in hand; drops what is still queued (its locks are released).
  ~WorkerDataCache();
  WorkerDataCache(const WorkerDataCache&) = delete;
  WorkerDataCache& operator=(const WorkerDataCache&) = delete;

  // The directory the ranks get as CONVOY_CACHE_DIR.
  const std::string& dir() const { return dir_; }

  // Queues the fill of the trainer's data files in `data_dir` (empty: the trainer's default):
  // under a root, of those whose entry is missing or stale; elsewhere, of every one (its
  // content entry is looked up by hash on the cache's thread), read only when it belongs to
  // `owner_uid` (-1: anyone; the job's account). Returns how many fills it queued. See the
  // threading note above.
  int Ensure(const std::string& data_dir, int64_t owner_uid = -1) EXCLUDES(mu_);

  // Fills done and failed so far (tests, logs). Any thread.
  struct Counts {
    int64_t filled = 0;
    int64_t failed = 0;
  };
  Counts counts() EXCLUDES(mu_);
  // Waits until nothing is queued or being filled (tests, the prefill's log line).
  void WaitIdle() EXCLUDES(mu_);

 private:
  WorkerDataCache(std::string dir, std::vector<std::string> roots, int64_t max_content_bytes)
      : dir_(std::move(dir)), roots_(std::move(roots)), max_content_bytes_(max_content_bytes) {}
  void Loop() EXCLUDES(mu_);

  struct Fill {
    std::string file;
    EntryLock lock;  // the path entry's (for a content fill: held so that ranks wait)
    bool by_content = false;
    int64_t owner_uid = -1;
  };
  const std::string dir_;
  const std::vector<std::string> roots_;
  const int64_t max_content_bytes_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Fill> queue_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  Counts counts_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace convoy

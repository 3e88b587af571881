// Unpacks jobs' code archives off the supervisor thread: an archive of up to 100 MiB must not
// hold up heartbeats, log pumping or kills (worker/supervise/supervisor.h). One thread, one archive
// at a time, in the order asked; each result goes to the caller's `done`, on that thread.
//
// Threading: Unpack and Stop from any thread; `done` runs on the unpacking thread, without
// this class's lock held.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"

namespace convoy {

class CodeUnpacker {
 public:
  // Files unpacked, or why not (NOT_FOUND: the archive is not in the cache).
  using Done = std::function<void(StatusOr<int64_t>)>;

  // Archives are read from the worker's code cache (CodeArchivePath(work_dir, sha256));
  // `before_unpack` (may be empty) runs on the unpacking thread before each one (tests hold
  // it there).
  CodeUnpacker(std::string work_dir, std::function<void(const std::string&)> before_unpack);
  // Stops (as Stop).
  ~CodeUnpacker();
  CodeUnpacker(const CodeUnpacker&) = delete;
  CodeUnpacker& operator=(const CodeUnpacker&) = delete;

  // Starts the unpacking thread. Call once.
  void Start();
  // Queues archive `sha256` to be unpacked into `dest`, its files given to uid:gid (-1: kept).
  void Unpack(std::string sha256, std::string dest, int64_t uid, int64_t gid, Done done)
      EXCLUDES(mu_);
  // Ends the thread once the archive in hand is done; what is still queued is dropped (its
  // `done` never runs). Idempotent.
  void Stop() EXCLUDES(mu_);

 private:
  struct Job {
    std::string sha256;
    std::string dest;
    int64_t uid = -1;
    int64_t gid = -1;
    Done done;
  };
  void Loop() EXCLUDES(mu_);

  const std::string work_dir_;
  const std::function<void(const std::string&)> before_unpack_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Job> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace convoy

// Fetching a job's code archive (JobSpec.code_sha256) from the coordinator into the worker's
// cache, `<work-dir>/code/<sha256>.tar.gz` (0600 in a 0700 directory), before the Launch
// that names it reaches the supervisor, which unpacks it into the job's directory.
//
// Threading: runs on the connection thread (it blocks while it fetches, in 4 MiB calls);
// touches no shared state besides the cache file, written under a temporary name and
// renamed once its hash was checked.
#pragma once

#include <string>

#include "common/status.h"
#include "convoy/v1/worker.grpc.pb.h"

namespace convoy {

// Makes sure `CodeArchivePath(work_dir, sha256)` holds the archive: nothing to do when it is
// there already, else fetched with WorkerService.FetchCode and checked against the hash.
Status FetchCodeArchive(v1::WorkerService::Stub& stub, const std::string& work_dir,
                        const std::string& sha256);

// The cache keeps an archive for kCodeCacheIdleS after its last use (each Launch naming it
// uses it; the job's directory has it unpacked, and a later attempt fetches it again if it
// is gone). Removes the archives idle for longer, and `.part` files (every one when
// `at_start`: a fetch in progress died with the last worker). Returns the archives removed.
// FetchCodeArchive calls it after each fetch, the worker at its start.
constexpr int64_t kCodeCacheIdleS = 3600;
int CollectCodeCache(const std::string& work_dir, int64_t max_idle_s, bool at_start);

}  // namespace convoy

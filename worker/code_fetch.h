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

}  // namespace convoy

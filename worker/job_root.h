// Where a worker keeps the jobs' own directories (--job-root), checked once at start: apart
// from the worker's own directories and reachable by the ranks' user (issue 32). Shared by
// the daemon's start and --check-config, so that both say the same.
//
// Threading: free functions; any thread.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "worker/process_launcher.h"

namespace convoy {

// The job root to use: `flag_value`, or `<work_dir>/job-root` when it is empty, created when
// missing (0711 for what it creates) and canonical. Refused (INVALID_ARGUMENT naming the
// flag) when it cannot be made, when job directories would hold or lie in the worker's own
// directories (CheckJobRootForRanks, worker/check_config.h; and `snapshot_root`, empty for
// none), when `run_as` (the ranks' user; nullopt: this process's user) cannot search every
// directory down to it, or cannot pass through to `work_dir` (canonical) or to
// `snapshot_root`. `create` false only
// checks: nothing is made, a missing directory is judged by its nearest existing ancestor.
StatusOr<std::string> StartupJobRoot(const std::string& flag_value, const std::string& work_dir,
                                     const std::string& snapshot_root,
                                     const std::optional<RunAsUser>& run_as, bool create = true);

}  // namespace convoy

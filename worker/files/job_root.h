// Where a worker keeps the jobs' own directories (--job-root), checked once at start: apart
// from the worker's own directories and reachable by the ranks' user (issue 32). Shared by
// the daemon's start and --check-config, so that both say the same.
//
// Threading: free functions; any thread.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "worker/host/users.h"

namespace convoy {

// The job root to use: `flag_value`, or `<work_dir>/job-root` when it is empty, created when
// missing (0711 for what it creates) and canonical. Refused (INVALID_ARGUMENT naming the
// flag) when it cannot be made, when job directories would hold or lie in the worker's own
// directories (CheckJobRootForRanks, below; and `snapshot_root`, empty for
// none), when `run_as` (the ranks' user; nullopt: this process's user) cannot search every
// directory down to it, or cannot pass through to `work_dir` (canonical) or to
// `snapshot_root`. `create` false only
// checks: nothing is made, a missing directory is judged by its nearest existing ancestor.
StatusOr<std::string> StartupJobRoot(const std::string& flag_value, const std::string& work_dir,
                                     const std::string& snapshot_root,
                                     const std::optional<RunAsUser>& run_as, bool create = true);

// OK when job directories <job_root>/<job id> can neither be nor contain one of the worker's
// own directories (`work_dir` itself and its jobs/, run/, code/, tls/, data-cache/,
// snapshots/), and when the ranks' user (`run_as`; nullopt: this process's user) can search
// every existing directory from "/" down to `job_root`. Both paths are taken as far as they
// exist with symlinks resolved; nothing is created. Else INVALID_ARGUMENT naming --job-root.
Status CheckJobRootForRanks(const std::string& job_root, const std::string& work_dir,
                            const std::optional<RunAsUser>& run_as);

}  // namespace convoy

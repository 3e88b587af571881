// convoy-worker --check-config: validates a parsed configuration without starting anything
// (no directory created, no coordinator contacted). Called from main's thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/flags.h"
#include "worker/process_launcher.h"

namespace convoy {

// Checks what the worker's start would check with `flags`, and reports every problem, not
// only the first: the work dir and job root exist or can be created and are writable, the
// job root is apart from the worker's own directories and reachable by the ranks' user
// (CheckJobRootForRanks), the run-as user exists (a root worker), the trainer is
// executable, and the worker has credentials as its start decides them (worker/credentials.h:
// --insecure; or --tls-cert/--tls-key/--tls-ca that load, match and name --name; or a valid
// certificate for --name stored in <work dir>/tls; or a join token with --ca-fingerprint).
// Each problem is appended to `errors` (naming the flag to fix); `notes` receives what was
// checked, for the operator.
void CheckWorkerConfig(const WorkerFlags& flags, std::vector<std::string>* notes,
                       std::vector<std::string>* errors);

// OK when job directories <job_root>/<job id> can neither be nor contain one of the worker's
// own directories (`work_dir` itself and its jobs/, run/, code/, tls/, data-cache/,
// snapshots/), and when the ranks' user (`run_as`; nullopt: this process's user) can search
// every existing directory from "/" down to `job_root`. Both paths are taken as far as they
// exist with symlinks resolved; nothing is created. Else INVALID_ARGUMENT naming --job-root.
Status CheckJobRootForRanks(const std::string& job_root, const std::string& work_dir,
                            const std::optional<RunAsUser>& run_as);

}  // namespace convoy

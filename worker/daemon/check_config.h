// convoy-worker --check-config: validates a parsed configuration without starting anything
// (no directory created, no coordinator contacted). Called from main's thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/daemon/flags.h"
#include "worker/host/users.h"

namespace convoy {

// Checks what the worker's start would check with `flags`, and reports every problem, not
// only the first: the work dir and job root exist or can be created and are writable, the
// job root is apart from the worker's own directories and reachable by the ranks' user
// (CheckJobRootForRanks, worker/files/job_root.h), the run-as user exists (a root worker), the
// trainer is executable, and the worker has credentials as its start decides them
// (worker/link/credentials.h:
// --insecure; or --tls-cert/--tls-key/--tls-ca that load, match and name --name; or a valid
// certificate for --name stored in <work dir>/tls; or a join token with --ca-fingerprint).
// Each problem is appended to `errors` (naming the flag to fix); `notes` receives what was
// checked, for the operator.
void CheckWorkerConfig(const WorkerFlags& flags, std::vector<std::string>* notes,
                       std::vector<std::string>* errors);

}  // namespace convoy

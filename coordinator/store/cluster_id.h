// The cluster's own id: made once per state directory and kept there (DESIGN.md "Identity
// and state"). Job ids (j-000001) repeat on every fresh state directory; (cluster id, job
// uid) never does, and keys everything saved for a job.
#pragma once

#include <string>

#include "common/status.h"

namespace convoy {

// Reads `state_dir`/cluster-id (32 lower-case hex characters and a newline), or, when there
// is none, makes a new random one and writes it there (mode 0600, written whole or not at
// all); `*made` says which. A file that exists but does not hold such an id is an error
// naming it (never silently replaced: jobs' saved state is keyed by it).
StatusOr<std::string> LoadOrMakeClusterId(const std::string& state_dir, bool* made);

}  // namespace convoy

// convoy-worker --check-config: validates a parsed configuration without starting anything
// (no directory created, no coordinator contacted). Called from main's thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "worker/flags.h"

namespace convoy {

// OK when the worker could start with `flags`: the work dir and job root exist or can be
// created and are writable, the run-as user exists (a root worker), the trainer is
// executable, the operator's TLS files (if given) load, match and name --name. `notes`
// receives what was checked. The error says what to fix.
Status CheckWorkerConfig(const WorkerFlags& flags, std::vector<std::string>* notes);

}  // namespace convoy

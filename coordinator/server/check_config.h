// convoy-coordinator --check-config: validates a parsed configuration without starting
// anything (no directory created, no port bound, no CA made). Called from main's thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/server/flags.h"

namespace convoy {

// Checks what the coordinator's start would check with `flags` (ParseCoordinatorFlags checked
// the addresses and ranges already): the state directory exists or can be created and is
// writable (tried: a read-only or pseudo file system is caught), its databases are
// readable, its CA (if made already) loads, the operator's TLS files (if given) load and
// match. Every problem is appended to `errors`, each saying what to fix; `notes` receives
// what was checked, for the operator.
void CheckCoordinatorConfig(const CoordinatorFlags& flags, std::vector<std::string>* notes,
                            std::vector<std::string>* errors);

}  // namespace convoy

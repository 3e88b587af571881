// convoy-coordinator --check-config: validates a parsed configuration without starting
// anything (no directory created, no port bound, no CA made). Called from main's thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/flags.h"

namespace convoy {

// OK when the coordinator could start with `flags`: the listen addresses parse, the state
// directory exists or can be created and is writable, its CA (if made already) loads, the
// operator's TLS files (if given) load and match. `notes` receives what was checked, for the
// operator. The error says what to fix.
Status CheckCoordinatorConfig(const CoordinatorFlags& flags, std::vector<std::string>* notes);

}  // namespace convoy

// convoy-coordinator's local administration commands: `init` and `token create|list|revoke`.
// They work on the state directory directly (the running coordinator sees token changes on
// its next call), so that they need no credentials but the file system's: run them as the
// user that owns the state (the `convoy` user under systemd).
#pragma once

#include "coordinator/server/flags.h"

namespace convoy {

// Returns the process's exit code.
int RunAdminCommand(const CoordinatorFlags& flags);

}  // namespace convoy

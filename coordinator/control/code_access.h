// Which code archive a job may name (issue 28): a spec's code_sha256 must be stored, and
// uploaded by the job's owner (an admin may name any). Knowing a hash (GetJob shows it) is
// not having the code. JobService.SubmitJob asks before the Coordinator decides anything.
//
// Threading: any thread (CodeStore serialises itself); never under the state lock.
#pragma once

#include <string>

#include "common/status.h"
#include "coordinator/store/code_store.h"

namespace convoy {

// OK when `code_sha256` is empty (no code), or stored and owned by `user` (or `admin`).
// FAILED_PRECONDITION when it is not stored (or `code` is null: this coordinator keeps no
// code); PERMISSION_DENIED when someone else uploaded it. `who` names the caller in the
// message. Errors name the field code_sha256.
Status CheckJobCode(CodeStore* code, const std::string& code_sha256, const std::string& user,
                    bool admin, const std::string& who);

}  // namespace convoy

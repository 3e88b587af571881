// Copying a resume_from job's checkpoints into the resuming job's own directory, when the two
// jobs run as different identities (another job's directory is its identity's alone). A copy
// of a large checkpoint takes seconds: the supervisor runs it off its loop
// (worker/supervise/launch_admission.h), never on the thread that sends heartbeats.
//
// Threading: a free function without shared state; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace convoy {

// Copies the checkpoint files of `from` (rank_contract::IsCheckpointName: whole ones, regular
// files, links not followed) into `to` (made 0700, owned by uid:gid, as are the copies; -1:
// kept) through `<to>.tmp`, renamed when complete, and returns `to`. An existing `to` (an
// earlier attempt's copy) is used as it is. A missing `from` (the job ran on another worker
// without a shared job root) gives an empty copy: the trainer then finds no checkpoint there,
// as it would in `from`. NOT_FOUND when `from` cannot be read, INTERNAL naming the file that
// could not be copied (nothing of the copy is left then).
StatusOr<std::string> CopyCheckpoints(const std::string& from, const std::string& to, int64_t uid,
                                      int64_t gid);

}  // namespace convoy

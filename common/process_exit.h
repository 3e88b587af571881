// How a rank's end reads in logs and failure reasons: one wording for the worker and the
// coordinator.
#pragma once

#include <string>

#include "convoy/v1/common.pb.h"

namespace convoy {

// "exited with code 3", "killed by SIGSEGV", "killed by the kernel OOM killer at its 4 GiB
// memory_per_proc", each followed by ": raised ValueError: ..." when the rank's
// TORCHELASTIC_ERROR_FILE said so.
std::string DescribeExit(const v1::ProcessExit& e);

}  // namespace convoy

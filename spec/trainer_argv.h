// The one mapping from a JobSpec to the argv of its processes, shared by the worker (which
// runs it) and the tests. The trainer's flags are its command-line contract.
#pragma once

#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"

namespace convoy {

// argv for one rank of `spec`. For a trainer job: `trainer_path` followed by one flag per
// non-default TrainerSpec field (--model, --epochs, --max-steps, --batch-size, --lr,
// --momentum, --optimizer, --lr-schedule, --clip-grad-norm, --accumulate, --bucket-mb,
// --checkpoint-every, --data-dir, --seed), then --backend, then extra_args. For a command
// job: the command as given. Never a shell string.
std::vector<std::string> BuildArgv(const v1::JobSpec& spec, const std::string& trainer_path);

}  // namespace convoy

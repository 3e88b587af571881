// The one mapping from a JobSpec to the argv of its processes, shared by the worker (which
// runs it) and the tests. The built-in trainer's own fields do not travel as flags: the
// worker gives the trainer its TrainerSpec (spec/trainer_spec_env.h).
#pragma once

#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"

namespace convoy {

// argv for one rank of `spec`. For a trainer job: `trainer_path`, --backend (the job's, not
// the TrainerSpec's) and extra_args, which come last so that they can set any flag (README
// "Job spec"). For a command job: the command as given. Never a shell string.
std::vector<std::string> BuildArgv(const v1::JobSpec& spec, const std::string& trainer_path);

}  // namespace convoy

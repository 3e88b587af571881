// The name of the environment variable that carries a trainer job's TrainerSpec to its ranks
// (spec/trainer_spec_env.h). On its own, free of the protos, so that a convoy-trainer built
// without them (trainer/spec_options_standalone.cc) names the same variable.
#pragma once

namespace convoy {

inline constexpr char kTrainerSpecEnv[] = "CONVOY_TRAINER_SPEC";

}  // namespace convoy

// The trainer's options from its part of the job spec: the TrainerSpec message the worker
// gives every rank of a trainer job (CONVOY_TRAINER_SPEC, spec/trainer_spec_env.h), checked by
// the validator that checked it at submit. Built where the protos are (the Convoy tree); a
// convoy-trainer built on its own (trainer/CMakeLists.txt) refuses the variable and takes
// flags only.
#pragma once

#include "convoy/v1/common.pb.h"
#include "trainer/options.h"

namespace convoy::trainer {

// Sets each field `trainer` gives (a written optional field, a non-empty string, a non-zero
// number) and leaves the others at their defaults. `trainer` must be valid
// (FindTrainerSpecProblems): the fields are copied, not checked again. extra_args are flags
// on argv and are not read here.
void ApplyTrainerSpec(const v1::TrainerSpec& trainer, Options* out);

}  // namespace convoy::trainer

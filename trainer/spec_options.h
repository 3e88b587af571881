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
// number: TrainerSpecValues, by reflection) through the flag of the same name (OptionFlags:
// max_steps sets --max-steps), and leaves the others at their defaults. Returns "" or the
// error naming the field ("trainer.lr: ..."): a field without a flag, or a value the flag
// refuses, which a spec FindTrainerSpecProblems accepted never has. extra_args are flags on
// argv and are not read here.
std::string ApplyTrainerSpec(const v1::TrainerSpec& trainer, Options* out);

}  // namespace convoy::trainer

// How the built-in trainer gets its part of the job spec: the TrainerSpec message itself, in
// one environment variable, not re-parsed flags. The worker sets it on every rank of a
// trainer job (worker/rank_env.h); convoy-trainer reads it, checks it with the validator that
// checked it at submit (FindTrainerSpecProblems) and takes its options from it
// (trainer/spec_options.h), so that the two can never disagree on a range or a default.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "convoy/v1/common.pb.h"
#include "spec/trainer_spec_variable.h"

namespace convoy {

// The variable's value: `trainer` as the proto's JSON (field names as the spec writes them,
// "batch_size"), on one line. extra_args are left out: they stay on argv, after the flags the
// worker sets (README "Job spec"), and are bounded by the spec, not by an environment
// variable's size.
std::string EncodeTrainerSpec(const v1::TrainerSpec& trainer);

// The TrainerSpec in `text` (EncodeTrainerSpec's), checked with FindTrainerSpecProblems.
// INVALID_ARGUMENT naming the variable and the field ("CONVOY_TRAINER_SPEC: trainer.lr: must
// be ...") when it is not that JSON, has a field this trainer does not know (a worker of
// another version), or has a value outside its range.
StatusOr<v1::TrainerSpec> DecodeTrainerSpec(const std::string& text);

// Each field `trainer` sets, found by protobuf reflection (so that no list of the fields is
// kept by hand: the spec's reader and writer, job_spec.cc, and the trainer's options,
// trainer/spec_options.cc, follow the message): a written optional field, a non-empty
// string, a non-zero number, in the message's order, as its name and its value as text
// (integers in decimal, doubles with 17 significant digits, which read back exactly). Lists
// (extra_args, on argv) are left out.
std::vector<std::pair<std::string, std::string>> TrainerSpecValues(const v1::TrainerSpec& trainer);

// The convoy-trainer flag that sets a TrainerSpec field: "--" and the field's name with '-'
// for '_' (max_steps: --max-steps).
std::string TrainerFlagName(const std::string& field);

}  // namespace convoy

#include "spec/trainer_spec_env.h"

#include <google/protobuf/util/json_util.h>

#include <vector>

#include "spec/job_spec_validation.h"

namespace convoy {

std::string EncodeTrainerSpec(const v1::TrainerSpec& trainer) {
  v1::TrainerSpec sent = trainer;
  sent.clear_extra_args();
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string text;
  // A TrainerSpec holds no Any and no map: printing cannot fail.
  (void)google::protobuf::util::MessageToJsonString(sent, &text, options);
  return text;
}

StatusOr<v1::TrainerSpec> DecodeTrainerSpec(const std::string& text) {
  v1::TrainerSpec trainer;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(text, &trainer, options);
  if (!parsed.ok()) {
    return Status::InvalidArgument(std::string(kTrainerSpecEnv) + ": not a TrainerSpec (" +
                                   parsed.ToString() + ")");
  }
  CONVOY_RETURN_IF_ERROR(
      SpecProblemsStatus(FindTrainerSpecProblems(trainer), std::string(kTrainerSpecEnv) + ": "));
  return trainer;
}

}  // namespace convoy

#include "spec/trainer_spec_env.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
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

std::vector<std::pair<std::string, std::string>> TrainerSpecValues(const v1::TrainerSpec& trainer) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = trainer.GetReflection();
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<const FieldDescriptor*> set;
  r->ListFields(trainer, &set);  // the fields set, by number
  for (const FieldDescriptor* fd : set) {
    if (fd->is_repeated()) continue;
    std::string text;
    switch (fd->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        text = r->GetString(trainer, fd);
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        text = std::to_string(r->GetInt32(trainer, fd));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        text = std::to_string(r->GetInt64(trainer, fd));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        char buf[40];
        std::snprintf(buf, sizeof(buf), "%.17g", r->GetDouble(trainer, fd));
        text = buf;
        break;
      }
      default:
        continue;  // no field of another type yet
    }
    out.emplace_back(fd->name(), std::move(text));
  }
  return out;
}

std::string TrainerFlagName(const std::string& field) {
  std::string flag = "--" + field;
  for (char& c : flag) {
    if (c == '_') c = '-';
  }
  return flag;
}

}  // namespace convoy

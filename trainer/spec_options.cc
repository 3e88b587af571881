#include "trainer/spec_options.h"

#include <cstdlib>

#include "spec/trainer_spec_env.h"

namespace convoy::trainer {

std::string ApplyTrainerSpec(const v1::TrainerSpec& t, Options* o) {
  const std::map<std::string, FlagSetter> flags = OptionFlags(o);
  for (const auto& [field, value] : TrainerSpecValues(t)) {
    auto flag = flags.find(TrainerFlagName(field));
    if (flag == flags.end()) {
      return "trainer." + field + ": this convoy-trainer has no " + TrainerFlagName(field);
    }
    if (std::string err = flag->second(value); !err.empty()) return "trainer." + field + ": " + err;
  }
  return "";
}

std::string ReadTrainerSpecEnvironment(Options* o) {
  const char* text = std::getenv(kTrainerSpecEnv);
  if (text == nullptr) return "";
  auto trainer = DecodeTrainerSpec(text);
  if (!trainer.ok()) return trainer.status().message();
  if (std::string err = ApplyTrainerSpec(*trainer, o); !err.empty()) {
    return std::string(kTrainerSpecEnv) + ": " + err;
  }
  return "";
}

}  // namespace convoy::trainer

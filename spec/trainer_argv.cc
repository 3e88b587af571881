#include "spec/trainer_argv.h"

namespace convoy {

std::vector<std::string> BuildArgv(const v1::JobSpec& spec, const std::string& trainer_path) {
  if (!spec.has_trainer()) {
    return {spec.command().begin(), spec.command().end()};
  }
  std::vector<std::string> argv{trainer_path, "--backend",
                                spec.backend().empty() ? "gloo" : spec.backend()};
  argv.insert(argv.end(), spec.trainer().extra_args().begin(), spec.trainer().extra_args().end());
  return argv;
}

}  // namespace convoy

// convoy-trainer built on its own (no protos): flags only. A worker's CONVOY_TRAINER_SPEC is
// refused rather than ignored, so that a job never trains with other settings than its spec's.
#include <cstdlib>
#include <string>

#include "spec/trainer_spec_variable.h"
#include "trainer/options.h"

namespace convoy::trainer {

std::string ReadTrainerSpecEnvironment(Options*) {
  if (std::getenv(kTrainerSpecEnv) == nullptr) return "";
  return std::string(kTrainerSpecEnv) +
         ": this convoy-trainer was built on its own, without the job spec's protos; a Convoy "
         "worker needs the convoy-trainer of its own build";
}

}  // namespace convoy::trainer

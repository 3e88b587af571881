// The training program: rendezvous, DDP training with checkpoints and evaluation, metric
// records. main.cc only parses options and calls Run.
#pragma once

#include "trainer/options.h"

namespace convoy::trainer {

// Trains as `options` says. Returns the process exit code; throws on errors (bad data,
// a failed collective), which main reports.
int Run(const Options& options);

}  // namespace convoy::trainer

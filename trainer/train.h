// The training program: rendezvous, DDP training with checkpoints and evaluation, metric
// records. main.cc only parses options and calls Run.
#pragma once

#include "trainer/options.h"

namespace convoy::trainer {

// Trains as `options` says. Returns the process exit code; throws on errors (bad data,
// a failed collective), which main reports.
int Run(const Options& options);

// --fill-data-cache: decompresses the training and test sets of `options.data_dir` into the
// data cache (`options.data_cache`, trainer/data_cache.h) and exits: what a worker runs once
// at start so that its first rank finds them there. Returns 0, or 2 without a cache.
int FillDataCache(const Options& options);

}  // namespace convoy::trainer

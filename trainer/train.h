// The training program: rendezvous, DDP training with checkpoints and evaluation, metric
// records. main.cc only parses options and calls Run.
#pragma once

#include "trainer/options.h"

namespace convoy::trainer {

// Trains as `options` says. Returns the process exit code; throws on errors (bad data,
// a failed collective), which main reports.
int Run(const Options& options);

// --fill-data-cache: decompresses the training and test sets of `options.data_dir` into the
// data cache `options.data_cache` (common/data_cache.h), which this user then owns, and
// exits: a cache filled by hand for ranks run by hand (a worker fills its own). Returns 0, 1
// when it cannot, or 2 without a cache.
int FillDataCache(const Options& options);

}  // namespace convoy::trainer

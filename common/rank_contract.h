// The contract between the worker and the processes of a rank (convoy-trainer, a user's
// script through bench/ and examples' convoy_metrics.py): what the worker gives a rank and
// what a rank may expect to find, written once. Header-only, standard library only: the
// trainer includes it also when it is built on its own.
#pragma once

#include <string>
#include <vector>

namespace convoy::rank_contract {

// ---- Data
// convoy-trainer's data directory when its spec names none (Debian's dataset-fashion-mnist).
inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";
// The IDX files the built-in trainer reads from a data directory: the training and test
// images and labels of Fashion-MNIST. `split` "train" or "t10k", `kind` "images" or "labels".
inline std::string DataFile(const std::string& dir, const std::string& split,
                            const std::string& kind) {
  return dir + "/" + split + "-" + kind + (kind == "images" ? "-idx3" : "-idx1") + "-ubyte.gz";
}
// Every file of DataFile in `dir`: what the worker caches for a trainer job (common/data_cache.h).
inline std::vector<std::string> DataFiles(const std::string& dir) {
  return {DataFile(dir, "train", "images"), DataFile(dir, "train", "labels"),
          DataFile(dir, "t10k", "images"), DataFile(dir, "t10k", "labels")};
}

// ---- Metric records (the JSON lines a rank writes to CONVOY_METRICS_SOCKET)
// Bad steps (issue 42, trainer/bad_steps.h): a "step" record's count of the steps this attempt
// skipped so far because a loss or gradient norm was not finite on some rank; the record kind
// written when the ranks rewound to a good state after too many in a row, with the last bad
// step ("step"), the step of the state loaded (kMetricRewoundTo) and the attempt's rewinds.
inline constexpr const char* kMetricBadSteps = "bad_steps";
inline constexpr const char* kRecordRewind = "rewind";
inline constexpr const char* kMetricRewoundTo = "to_step";
inline constexpr const char* kMetricRewinds = "rewinds";

}  // namespace convoy::rank_contract

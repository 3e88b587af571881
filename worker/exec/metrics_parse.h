// Parsing the metric records a rank writes to CONVOY_METRICS_SOCKET: one JSON object per
// line. Pure code; any thread (a MetricLineSplitter is owned by one).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/common.pb.h"

namespace convoy {

// Longest line accepted; longer ones are dropped.
inline constexpr size_t kMaxMetricLineBytes = 64 * 1024;

// Longest checkpoint_path accepted (a file name: Linux's NAME_MAX is 255); longer ones are
// dropped.
inline constexpr size_t kMaxCheckpointPathBytes = 255;

// Parses a JSON object line: "step", "epoch", "loss", "samples", "seconds" go to their
// fields (setting has_step / has_loss), "kind" (a string) to kind, "checkpoint_path" (a
// string of at most kMaxCheckpointPathBytes) to checkpoint_path, "rank" to rank (the
// worker checks it against the rank it knows from the socket's peer; a record never chooses
// its rank), and every other finite
// numeric field to values (at most 64 of them, names of at most 64 bytes). Strings, arrays,
// nested objects and booleans other than those are ignored. INVALID_ARGUMENT for anything
// that is not a JSON object of at most kMaxMetricLineBytes. Never throws.
// `has_rank`, when given, says whether the line had a numeric "rank".
StatusOr<v1::MetricRecord> ParseMetricLine(const std::string& line, bool* has_rank = nullptr);

// Cuts a byte stream into lines of at most kMaxMetricLineBytes. A longer line is dropped
// whole (up to its newline) and counted, never split into pieces that could parse.
class MetricLineSplitter {
 public:
  // Appends bytes; returns the complete lines they finished (without the '\n').
  std::vector<std::string> Feed(const char* data, size_t n);
  // The stream ended: true when an unterminated last line was dropped.
  bool Finish();
  // Over-long lines dropped so far.
  int64_t dropped_long() const { return dropped_long_; }

 private:
  std::string buffer_;
  bool discarding_ = false;  // inside an over-long line: skip to its newline
  int64_t dropped_long_ = 0;
};

}  // namespace convoy

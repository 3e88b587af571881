// Parsing one metric record line written by a rank to CONVOY_METRICS_SOCKET.
#pragma once

#include <string>

#include "common/status.h"
#include "convoy/v1/common.pb.h"

namespace convoy {

// Longest line accepted; longer ones are dropped.
inline constexpr size_t kMaxMetricLineBytes = 64 * 1024;

// Parses a JSON object line: "step", "epoch", "loss", "samples", "seconds" go to their
// fields, "kind" (a string) to kind, "rank" (when the worker cannot tell the rank from the
// socket's peer) to rank, and every other numeric field to values. INVALID_ARGUMENT for
// anything that is not a JSON object of at most kMaxMetricLineBytes.
StatusOr<v1::MetricRecord> ParseMetricLine(const std::string& line);

}  // namespace convoy

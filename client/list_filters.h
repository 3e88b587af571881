// The filters of `convoy list` as the user types them: states, and the start of a time range
// (`--since`). Pure functions ("now" is passed in), tested without a server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/common.pb.h"

namespace convoy {

// `--state` values: each one state name or several separated by commas, any case
// ("RUNNING", "pending,restarting"). INVALID_ARGUMENT naming the field:
// "state: unknown state 'RUNING' (one of PENDING, SCHEDULED, ...)". No duplicates out.
StatusOr<std::vector<v1::JobState>> ParseStateFilter(const std::vector<std::string>& values);

// `--since`: a duration back from `now_unix_ms` ("90s", "15m", "1h", "7d"), or a local time
// "2026-11-25", "2026-11-25T10:00" or "2026-11-25T10:00:30" (a trailing "Z": UTC instead).
// Returns milliseconds since the Unix epoch; INVALID_ARGUMENT naming "since" otherwise.
StatusOr<int64_t> ParseSince(const std::string& text, int64_t now_unix_ms);

}  // namespace convoy

// `convoy top`: every job that is not finished, one row each, with its progress, throughput
// and slowest rank, from ListJobs summaries (each carries its ranks' latest records). A pure
// function of its arguments, so it is tested with fixed jobs and a fixed "now".
#pragma once

#include <cstdint>
#include <string>

#include "convoy/v1/job.pb.h"

namespace convoy {

// A header line (counts by state and the time), then the table
// ID NAME STATE RANKS PROGRESS RATE LOSS SLOWEST AGE, where PROGRESS is a bar with the
// percentage and the step of the slowest rank over total_steps (or only the step when the
// total is unknown), RATE the sum of the ranks' samples/s, LOSS their mean, SLOWEST the rank
// with the fewest steps and how far it is behind the fastest ("even" when none is behind).
// Only records of each job's current attempt count. "no jobs running" when none is active.
std::string FormatTop(const v1::ListJobsResponse& jobs, int64_t now_unix_ms);

// The progress bar: `width` cells of █ and ░ for `fraction` (clamped to 0..1).
std::string ProgressBar(double fraction, int width);

}  // namespace convoy

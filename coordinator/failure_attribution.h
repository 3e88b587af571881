// Failure attribution: which failure of an attempt is the root cause, and whether a running
// attempt hangs. Pure functions of what the JobManager observed and of the time it passes in
// (tests give any time they like; no clock is read here).
//
// The rules: failures of one attempt are collected for a window (300 ms by default) because
// a rank killed by a signal makes its peers fail within milliseconds, in either order of
// arrival; a rank killed by a signal nobody in Convoy sent (SIGKILL from outside, SIGSEGV) is
// a likelier cause than peers that exited with errors; among equals, the first reported wins.
// A hang is ranks silent (no metric record) for the job's hang_timeout_s; a rank whose
// process is stopped is named over peers that fell silent waiting for it in a collective.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"

namespace convoy {

// 0 for a rank killed by a signal from outside Convoy, 1 for anything else.
int CauseClass(const v1::RankFailure& f);

// The root cause among `failures` (non-empty), in the order they were reported.
const v1::RankFailure& ChooseRootCause(const std::vector<v1::RankFailure>& failures);

struct RankLiveness {
  int rank = 0;
  bool gone = false;     // exited, or its worker was lost
  bool stopped = false;  // its worker says its process is stopped (SIGSTOP, a debugger)
  int64_t last_progress_ms = 0;
};

struct Hang {
  int rank = 0;  // the rank to blame
  std::string reason;
};

// The hang of a running attempt at `now_ms`, or nothing. `ranks` in rank order.
std::optional<Hang> DetectHang(const std::vector<RankLiveness>& ranks, int64_t now_ms,
                               int hang_timeout_s);

}  // namespace convoy

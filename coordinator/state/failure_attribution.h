// Failure attribution: which failure of an attempt is its root cause, when a rendezvous has
// taken too long, and whether a running attempt hangs.
//
// The rules: failures of one attempt are collected for a window (300 ms by default) because
// a rank killed by a signal makes its peers fail within milliseconds, in either order of
// arrival (the window closes at once when the cause is already certain: see RootCause); a rank
// killed by a signal nobody in Convoy sent (SIGKILL from outside, SIGSEGV) is a likelier cause than
// peers that exited with errors; among equals, the first reported wins; when no rank was killed
// from outside, a rank whose worker became unreachable meanwhile (its stream broke: the machine
// died or its link was cut) explains the others' broken collectives. A lost worker is decisive at
// once. A hang is ranks silent (no metric record) for the job's hang_timeout_s; a rank whose
// process is stopped is named over peers that fell silent waiting for it in a collective.
//
// The free functions are pure; FailureAttribution keeps one attempt's window, rendezvous
// deadline and next hang check on an injected Clock.
//
// Threading: none of its own; the JobManager calls it with the Coordinator's lock held.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
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
  // Whether it sent any record in this attempt. Until its first, it is starting (loading its
  // libraries and data, joining the rendezvous): its silence counts against the startup
  // allowance when that is longer than the hang timeout.
  bool reported = false;
};

struct Hang {
  int rank = 0;  // the rank to blame
  std::string reason;
};

// The hang of a running attempt at `now_ms`, or nothing. `ranks` in rank order. A rank that
// has reported is hung after `hang_timeout_s` without progress; one that has not reported yet
// after the longer of that and `startup_ms`.
std::optional<Hang> DetectHang(const std::vector<RankLiveness>& ranks, int64_t now_ms,
                               int hang_timeout_s, int64_t startup_ms = 0);

// "rendezvous timed out: rank(s) 3, 5 did not start" for the ranks (in order) not started.
std::string RendezvousTimeoutReason(const std::vector<int>& not_started);

// One attempt's failure attribution. Movable; reads time from the Clock given.
class FailureAttribution {
 public:
  FailureAttribution(const Clock& clock, int64_t window_ms)
      : clock_(&clock), window_ms_(window_ms) {}

  // A failure observed now. The first one opens the window; the root cause is chosen when
  // it closes (RootCause).
  void Report(v1::RankFailure failure);
  // A failure that is the cause whatever else was reported (a lost worker): forgets the
  // window's other failures and returns it, to be acted on at once.
  v1::RankFailure Decisive(v1::RankFailure failure);
  // True while failures are being collected (the window is open or not yet decided).
  bool collecting() const { return !pending_.empty(); }
  // Forgets the failures (the attempt was decided or torn down).
  void Clear() { pending_.clear(); }

  // Asked for when no rank was killed from outside: the failure of a rank that is not gone
  // and whose worker is not READY, or nothing.
  using UnreachablePeerFn = std::function<std::optional<v1::RankFailure>()>;
  // Once the window has closed: the root cause (see the rules above). Nothing while the
  // window is open or when nothing was reported. The window closes early when nothing later
  // could change the choice: a rank killed from outside was reported (the likeliest class,
  // and the first of it wins), or `all_reported` (every rank of the attempt is gone, so no
  // other failure can come). The failures stay until Clear (the attempt's teardown), so a
  // decision that could not be persisted is made again later.
  std::optional<v1::RankFailure> RootCause(const UnreachablePeerFn& unreachable_peer,
                                           bool all_reported = false);

  // The rendezvous must complete (every rank started) by `deadline_mono_ms`.
  void SetRendezvousDeadline(int64_t deadline_mono_ms) {
    rendezvous_deadline_ms_ = deadline_mono_ms;
  }
  // True when that deadline has passed and no failure is being collected (a failure decides
  // the attempt first).
  bool RendezvousOverdue() const;

  // The hang of a running attempt now, or nothing. `ranks` is called only when a hang can
  // have happened since the last check: after a check that found none, the next is due when
  // the rank that progressed least could reach the timeout (progress only moves forward), so
  // a 10,000-rank attempt is not scanned on every tick.
  using LivenessFn = std::function<std::vector<RankLiveness>()>;
  std::optional<Hang> CheckHang(const LivenessFn& ranks, int hang_timeout_s,
                                int64_t startup_ms = 0);

 private:
  const Clock* clock_;
  int64_t window_ms_;
  std::vector<v1::RankFailure> pending_;  // in arrival order
  int64_t window_end_ms_ = 0;
  int64_t rendezvous_deadline_ms_ = 0;
  int64_t next_hang_check_ms_ = 0;
};

}  // namespace convoy

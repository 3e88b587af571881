// One attempt's steps, as its ranks report them (metric records with a `step`): which rank
// is a straggler, and whether the attempt is in a collective hang (README "When nodes are
// sick"). Plain C++, fed by the coordinator's ProgressWatch; times are given, never read.
//
// A rank's step time. Data-parallel ranks meet in every step's all-reduce, so the times
// between one rank's records are the same on every rank: the slowest sets everyone's pace.
// What differs is when each rank gets from the all-reduce to its report. A rank's step time
// for step k is the time from the LAST report of step k-1 (any rank's) to its own report of
// step k: for a rank that spends s longer than its peers on its own work between the
// all-reduce and its report (a slow optimiser step, a slow host, a sleep), it is the whole
// period, and its peers' is the period minus s, so its ratio to its peers' median is its
// real slowness (c + s) / c. Work a slow rank does before the all-reduce (its forward and
// backward) is waited for by every rank alike and cannot be told apart from the reports;
// a rank that reports `busy_s` (its own work of the step, without waiting) is judged by that
// instead. Times are the workers' receive stamps (MetricRecord.time_unix_ms): on several
// hosts, their clocks' skew adds to the times (NTP keeps it to milliseconds).
//
// A straggler: once every rank has `straggler_steps` step times, a rank whose median step
// time is at least `straggler_factor` times the median of its peers' medians; it stops being
// one when it falls under the midpoint between 1 and the factor (hysteresis).
//
// A collective hang: `hang_steps` > 0, every rank has reported a step, the attempt's median
// step period is known (3 complete steps), and no rank has reported anything (a step or any
// other record) for hang_steps median periods (at least min_hang_ms): every rank stopped at
// once, as ranks blocked in a collective do. The suspect is a stopped rank (SIGSTOP, from the
// worker's heartbeat) if any, else the rank with the lowest step, else of those the one whose
// last report is the oldest: the rank its peers are waiting for.
//
// Threading: none. Cost: a record is O(1) amortised; a completed step is O(ranks x
// straggler_steps) (the medians), done every step for up to 256 ranks, every 4th beyond.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace convoy {

struct StepWatchOptions {
  double straggler_factor = 1.5;  // 0: never name a straggler
  int straggler_steps = 20;
  int hang_steps = 0;  // 0: no hang by progress
  int64_t min_hang_ms = 10000;
};

class StepWatch {
 public:
  // `workers`: the attempt's ranks and the worker each runs on.
  StepWatch(StepWatchOptions options, const std::map<int, std::string>& workers);

  // A metric record of `rank`, received at `time_unix_ms` (the worker's stamp) and `mono_ms`
  // (the caller's monotonic clock). `step` >= 0 for a record with a step, else -1; `busy_s`
  // >= 0 when the record says how long the rank worked on its own in the step.
  void OnRecord(int rank, int64_t step, int64_t time_unix_ms, int64_t mono_ms, double busy_s = -1);
  // The rank is gone (exited): steps complete without it, and it is never a suspect.
  void OnGone(int rank);

  struct RankTime {
    int rank = 0;
    std::string worker;
    double step_s = 0;   // its median step time over the window
    double peers_s = 0;  // the median of its peers' medians
    double ratio = 0;    // step_s / peers_s
    bool straggler = false;
  };
  // Every rank's step time as of the last evaluation (empty until the windows are full).
  const std::vector<RankTime>& step_times() const { return times_; }

  // A rank became a straggler (named) or stopped being one, at step `at_step`.
  struct Change {
    RankTime rank;
    bool named = false;
    int64_t at_step = 0;
  };
  // The changes since the last call, in order.
  std::vector<Change> TakeChanges() { return std::exchange(changes_, {}); }

  struct Suspect {
    int rank = 0;
    std::string worker;
    std::string reason;  // the whole story, for the failure's reason
  };
  // The collective hang at `now_mono_ms`, or nothing. `stopped`: ranks whose process is
  // stopped (their worker's heartbeat).
  std::optional<Suspect> CheckHang(int64_t now_mono_ms, const std::set<int>& stopped) const;
  // When CheckHang can next find a hang (monotonic ms), or 0 when it cannot (not armed).
  int64_t HangDueMs() const;

  // The median period of the attempt's complete steps (seconds; 0 until known).
  double median_period_s() const;
  int64_t completed_steps() const { return completed_; }

 private:
  struct Rank {
    int rank = 0;
    std::string worker;
    bool gone = false;
    int64_t step = -1;         // its last step
    int64_t step_mono_ms = 0;  // when that step's record came
    int64_t last_mono_ms = 0;  // its last record of any kind (0: none yet)
    std::deque<double> times;  // its step times, the newest last
    double busy_s = -1;        // of the step being completed, when it said
  };
  struct Arrivals {
    std::vector<int64_t> at;  // by rank index; -1: not yet
    std::vector<double> busy;
    size_t count = 0;
  };
  void Complete(int64_t step, const Arrivals& a);
  void Evaluate(int64_t step);

  const StepWatchOptions options_;
  std::vector<Rank> ranks_;
  std::map<int, size_t> index_;  // rank -> its index in ranks_
  size_t live_ = 0;
  std::map<int64_t, Arrivals> steps_;  // steps not yet complete
  int64_t last_complete_step_ = -1;
  int64_t last_complete_last_ms_ = 0;  // the latest report of that step
  std::deque<double> periods_;         // between consecutive complete steps (s), newest last
  int64_t completed_ = 0;
  std::vector<RankTime> times_;
  std::set<int> stragglers_;
  std::vector<Change> changes_;
};

// The median of `v` (empty: 0).
double Median(std::vector<double> v);

}  // namespace convoy

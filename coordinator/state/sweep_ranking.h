// How a sweep's trials are ranked (README "Sweeps"): which value of the sweep's metric is
// better, the best trial, and ASHA's decisions (asynchronous successive halving). Pure
// logic, no I/O: the SweepController (coordinator/control/sweeps.h) feeds it the trials'
// metric records and acts on what it decides.
//
// ASHA: rungs at min_steps * reduction_factor^k steps (k = 0, 1, ...). The first value a
// trial reports at or beyond a rung is its value at that rung. When a trial reaches a rung,
// it is compared with every value recorded at that rung so far (its own included): once at
// least reduction_factor trials are there, a trial that is not within the top
// 1/reduction_factor of them (more than floor(n / reduction_factor) others strictly better)
// is stopped. A NaN or infinite value counts as the worst. Trials that reached a rung earlier
// are not judged again when later ones arrive (that is what makes it asynchronous: no trial
// waits for a rung to fill).
//
// Threading: none of its own; the SweepController calls it with the Coordinator's lock held.
// Cost: Report is O(trials at the rungs it crosses).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace convoy {

// Whether `a` is strictly better than `b` under the goal (a NaN or an infinity is worse than
// any finite value, and not better than another NaN or infinity).
bool MetricBetter(double a, double b, bool maximize);

// The position of the best of `values` (nullopt entries: none reported); the first of equal
// ones wins; nullopt when none has a finite value.
std::optional<size_t> BestOf(const std::vector<std::optional<double>>& values, bool maximize);

class AshaRungs {
 public:
  struct Options {
    int64_t min_steps = 100;
    int reduction_factor = 3;
    bool maximize = false;
  };
  // A decision to stop a trial: at which rung, with which value, against how many.
  struct Stop {
    int64_t rung_step = 0;  // the rung
    int64_t step = 0;       // the step of the record that reached it
    double value = 0;
    int reached = 0;  // trials with a value at that rung, this one included
    int keep = 0;     // how many of them survive: reached / reduction_factor
    double best = 0;  // the best value at that rung
  };

  explicit AshaRungs(Options options) : options_(options) {}

  // Trial `trial` reported `value` at `step`. Records the value at every rung the trial
  // reached with it for the first time, lowest first, and returns the first of those rungs
  // at which it is not in the top 1/reduction_factor (nullopt: it goes on).
  std::optional<Stop> Report(int trial, int64_t step, double value);

  // The step of rung `k` (saturating at INT64_MAX).
  int64_t RungStep(int k) const;
  // Values recorded at rung `k`, by trial.
  const std::map<int, double>& ValuesAt(int k) const;

 private:
  Options options_;
  std::map<int, std::map<int, double>> rungs_;  // rung -> trial -> value
  std::map<int, int> next_rung_;                // trial -> the first rung it has not reached
};

// "stopped early (ASHA): test_accuracy 0.31 at step 200 is not in the top 1/3 of 3 trials at
// that rung (best 0.84)": the reason a stopped trial's event gives.
std::string AshaStopReason(const std::string& metric, int reduction_factor,
                           const AshaRungs::Stop& stop);

}  // namespace convoy

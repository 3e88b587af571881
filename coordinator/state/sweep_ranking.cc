#include "coordinator/state/sweep_ranking.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace convoy {
namespace {

std::string Text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return text;
}

}  // namespace

bool MetricBetter(double a, double b, bool maximize) {
  const bool fa = std::isfinite(a);
  const bool fb = std::isfinite(b);
  if (!fa) return false;
  if (!fb) return true;
  return maximize ? a > b : a < b;
}

std::optional<size_t> BestOf(const std::vector<std::optional<double>>& values, bool maximize) {
  std::optional<size_t> best;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i] || !std::isfinite(*values[i])) continue;
    if (!best || MetricBetter(*values[i], *values[*best], maximize)) best = i;
  }
  return best;
}

int64_t AshaRungs::RungStep(int k) const {
  int64_t step = options_.min_steps;
  for (int i = 0; i < k; ++i) {
    if (step > std::numeric_limits<int64_t>::max() / options_.reduction_factor) {
      return std::numeric_limits<int64_t>::max();
    }
    step *= options_.reduction_factor;
  }
  return step;
}

const std::map<int, double>& AshaRungs::ValuesAt(int k) const {
  static const std::map<int, double> kNone;
  auto it = rungs_.find(k);
  return it == rungs_.end() ? kNone : it->second;
}

std::optional<AshaRungs::Stop> AshaRungs::Report(int trial, int64_t step, double value) {
  std::optional<Stop> stop;
  int& next = next_rung_[trial];
  // At most 64 rungs: min_steps >= 1 and a factor >= 2 pass INT64_MAX before then.
  while (next < 64 && RungStep(next) <= step &&
         RungStep(next) != std::numeric_limits<int64_t>::max()) {
    const int k = next++;
    std::map<int, double>& at = rungs_[k];
    at[trial] = value;
    if (stop) continue;  // recorded; judged at the first rung that failed only
    const int reached = static_cast<int>(at.size());
    if (reached < options_.reduction_factor) continue;
    const int keep = std::max(1, reached / options_.reduction_factor);
    int better = 0;
    double best = value;
    for (const auto& [other, v] : at) {
      if (other != trial && MetricBetter(v, value, options_.maximize)) ++better;
      if (MetricBetter(v, best, options_.maximize)) best = v;
    }
    if (better >= keep) stop = Stop{RungStep(k), step, value, reached, keep, best};
  }
  return stop;
}

std::string AshaStopReason(const std::string& metric, int reduction_factor,
                           const AshaRungs::Stop& stop) {
  return "stopped early (ASHA): " + metric + " " + Text(stop.value) + " at step " +
         std::to_string(stop.step) + " is not in the top 1/" + std::to_string(reduction_factor) +
         " of " + std::to_string(stop.reached) + " trials at that rung (best " + Text(stop.best) +
         ")";
}

}  // namespace convoy

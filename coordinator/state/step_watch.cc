#include "coordinator/state/step_watch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <utility>

namespace convoy {
namespace {

// Steps kept waiting for their last report: a rank that reports only some steps (or only
// rank 0 reports) must not make the table grow without bound.
constexpr size_t kMaxOpenSteps = 64;
// Periods kept for the median period.
constexpr size_t kMaxPeriods = 64;

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), s < 10 ? "%.2f s" : "%.0f s", s);
  return text;
}

// The median of sorted `s` without its element at index `skip`.
double MedianWithout(const std::vector<double>& s, size_t skip) {
  const size_t n = s.size() - 1;
  if (n == 0) return 0;
  auto at = [&](size_t j) { return s[j < skip ? j : j + 1]; };
  return n % 2 == 1 ? at(n / 2) : (at(n / 2 - 1) + at(n / 2)) / 2;
}

}  // namespace

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lo + hi) / 2;
}

StepWatch::StepWatch(StepWatchOptions options, const std::map<int, std::string>& workers)
    : options_(options) {
  for (const auto& [rank, worker] : workers) {
    index_[rank] = ranks_.size();
    Rank r;
    r.rank = rank;
    r.worker = worker;
    ranks_.push_back(std::move(r));
  }
  live_ = ranks_.size();
}

void StepWatch::OnGone(int rank) {
  auto it = index_.find(rank);
  if (it == index_.end() || ranks_[it->second].gone) return;
  ranks_[it->second].gone = true;
  --live_;
}

void StepWatch::OnRecord(int rank, int64_t step, int64_t time_unix_ms, int64_t mono_ms,
                         double busy_s) {
  auto it = index_.find(rank);
  if (it == index_.end()) return;
  const size_t i = it->second;
  Rank& r = ranks_[i];
  if (r.gone) return;
  r.last_mono_ms = mono_ms;
  if (step < 0 || step <= r.step) return;  // no step, or one already seen (a final record)
  r.step = step;
  r.step_mono_ms = mono_ms;
  if (step <= last_complete_step_) return;
  Arrivals& a = steps_[step];
  if (a.at.empty()) {
    a.at.assign(ranks_.size(), -1);
    a.busy.assign(ranks_.size(), -1);
  }
  if (a.at[i] >= 0) return;
  a.at[i] = time_unix_ms;
  a.busy[i] = busy_s;
  ++a.count;
  size_t live_reported = 0;
  for (size_t k = 0; k < ranks_.size(); ++k) {
    if (!ranks_[k].gone && a.at[k] >= 0) ++live_reported;
  }
  if (live_reported >= live_ && live_ > 0) {
    const Arrivals done = std::move(a);
    // This step and every older one that will never complete go.
    steps_.erase(steps_.begin(), steps_.upper_bound(step));
    Complete(step, done);
  } else if (steps_.size() > kMaxOpenSteps) {
    steps_.erase(steps_.begin());
  }
}

void StepWatch::Complete(int64_t step, const Arrivals& a) {
  int64_t last = 0;
  bool all_busy = true;
  for (size_t k = 0; k < ranks_.size(); ++k) {
    if (ranks_[k].gone || a.at[k] < 0) continue;
    last = std::max(last, a.at[k]);
    all_busy = all_busy && a.busy[k] >= 0;
  }
  const bool consecutive = last_complete_step_ >= 0 && step == last_complete_step_ + 1;
  if (consecutive) {
    periods_.push_back(std::max(0.0, static_cast<double>(last - last_complete_last_ms_) / 1000));
    if (periods_.size() > kMaxPeriods) periods_.pop_front();
    const size_t window = static_cast<size_t>(std::max(1, options_.straggler_steps));
    for (size_t k = 0; k < ranks_.size(); ++k) {
      Rank& r = ranks_[k];
      if (r.gone || a.at[k] < 0) continue;
      const double own =
          all_busy ? a.busy[k] : static_cast<double>(a.at[k] - last_complete_last_ms_) / 1000;
      r.times.push_back(std::max(own, 0.001));
      if (r.times.size() > window) r.times.pop_front();
    }
    ++completed_;
    if (ranks_.size() <= 256 || completed_ % 4 == 0) Evaluate(step);
  }
  last_complete_step_ = step;
  last_complete_last_ms_ = last;
}

void StepWatch::Evaluate(int64_t step) {
  if (options_.straggler_factor <= 0 || live_ < 2) return;
  const size_t window = static_cast<size_t>(std::max(1, options_.straggler_steps));
  std::vector<RankTime> times;
  for (const Rank& r : ranks_) {
    if (r.gone) continue;
    if (r.times.size() < window) return;  // not every rank has a full window yet
    RankTime t;
    t.rank = r.rank;
    t.worker = r.worker;
    t.step_s = Median({r.times.begin(), r.times.end()});
    times.push_back(std::move(t));
  }
  std::vector<double> sorted;
  sorted.reserve(times.size());
  for (const RankTime& t : times) sorted.push_back(t.step_s);
  std::sort(sorted.begin(), sorted.end());
  const double clear_below = 1 + (options_.straggler_factor - 1) / 2;
  for (RankTime& t : times) {
    const size_t at = static_cast<size_t>(std::lower_bound(sorted.begin(), sorted.end(), t.step_s) -
                                          sorted.begin());
    t.peers_s = MedianWithout(sorted, at);
    t.ratio = t.peers_s > 0 ? t.step_s / t.peers_s : 1;
    const bool was = stragglers_.count(t.rank) > 0;
    t.straggler = was ? t.ratio >= clear_below : t.ratio >= options_.straggler_factor;
    if (t.straggler != was) {
      if (t.straggler) {
        stragglers_.insert(t.rank);
      } else {
        stragglers_.erase(t.rank);
      }
      changes_.push_back({t, t.straggler, step});
    }
  }
  times_ = std::move(times);
}

double StepWatch::median_period_s() const {
  if (periods_.size() < 3) return 0;
  return Median({periods_.begin(), periods_.end()});
}

int64_t StepWatch::HangDueMs() const {
  if (options_.hang_steps <= 0 || live_ == 0) return 0;
  const double period = median_period_s();
  if (period <= 0) return 0;
  int64_t newest = 0;
  for (const Rank& r : ranks_) {
    if (r.gone) continue;
    if (r.step < 0) return 0;  // a rank that never reported a step: not armed
    newest = std::max(newest, r.last_mono_ms);
  }
  const auto limit =
      std::max<int64_t>(options_.min_hang_ms,
                        static_cast<int64_t>(std::llround(period * 1000 * options_.hang_steps)));
  return newest + limit;
}

std::optional<StepWatch::Suspect> StepWatch::CheckHang(int64_t now_mono_ms,
                                                       const std::set<int>& stopped) const {
  const int64_t due = HangDueMs();
  if (due == 0 || now_mono_ms < due) return std::nullopt;
  const Rank* suspect = nullptr;
  int64_t max_step = -1, newest = 0;
  for (const Rank& r : ranks_) {
    if (r.gone) continue;
    max_step = std::max(max_step, r.step);
    newest = std::max(newest, r.last_mono_ms);
    auto key = [&stopped](const Rank& x) {
      return std::make_tuple(stopped.count(x.rank) == 0, x.step, x.last_mono_ms, x.rank);
    };
    if (suspect == nullptr || key(r) < key(*suspect)) suspect = &r;
  }
  if (suspect == nullptr) return std::nullopt;
  const double period = median_period_s();
  Suspect s;
  s.rank = suspect->rank;
  s.worker = suspect->worker;
  const double silent = static_cast<double>(now_mono_ms - newest) / 1000;
  s.reason = "collective hang: no rank has reported for " + Seconds(silent) + " (" +
             std::to_string(options_.hang_steps) + " median steps of " + Seconds(period) +
             "); rank " + std::to_string(suspect->rank) + " on " + suspect->worker;
  if (stopped.count(suspect->rank) > 0) {
    s.reason += " is stopped (its process does not run)";
  } else {
    s.reason += " reported last least recently (step " + std::to_string(suspect->step) + ", " +
                Seconds(static_cast<double>(now_mono_ms - suspect->last_mono_ms) / 1000) +
                " ago; its peers reached step " + std::to_string(max_step) + ")";
  }
  return s;
}

}  // namespace convoy

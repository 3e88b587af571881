#include "coordinator/failure_attribution.h"

#include <algorithm>

namespace convoy {

int CauseClass(const v1::RankFailure& f) {
  return f.exit().signal() != 0 && !f.exit().killed_by_worker() ? 0 : 1;
}

const v1::RankFailure& ChooseRootCause(const std::vector<v1::RankFailure>& failures) {
  // min_element keeps the first of equals: the earliest report of the likeliest class.
  return *std::min_element(failures.begin(), failures.end(),
                           [](const v1::RankFailure& a, const v1::RankFailure& b) {
                             return CauseClass(a) < CauseClass(b);
                           });
}

namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string out = ranks.size() > 1 ? " from ranks" : " from rank";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i == 0 ? " " : ", ") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

std::optional<Hang> DetectHang(const std::vector<RankLiveness>& ranks, int64_t now_ms,
                               int hang_timeout_s) {
  if (hang_timeout_s <= 0) return std::nullopt;
  const int64_t limit = int64_t{hang_timeout_s} * 1000;
  std::vector<int> silent;
  std::vector<int> stopped;
  size_t alive = 0;
  for (const RankLiveness& r : ranks) {
    if (r.gone) continue;
    ++alive;
    if (now_ms - r.last_progress_ms >= limit) silent.push_back(r.rank);
    // A rank whose process is stopped is the cause; peers waiting for it in a collective
    // fall silent too, possibly a moment earlier.
    if (r.stopped) stopped.push_back(r.rank);
  }
  if (silent.empty()) return std::nullopt;
  Hang hang;
  hang.reason = "hung: no progress for " + std::to_string(hang_timeout_s) + " s";
  if (!stopped.empty()) {
    hang.rank = stopped[0];
    hang.reason += RankList(stopped) + (stopped.size() > 1 ? " (their processes are stopped)"
                                                           : " (its process is stopped)");
  } else {
    hang.rank = silent[0];
    if (silent.size() < alive) hang.reason += RankList(silent);
  }
  return hang;
}

}  // namespace convoy

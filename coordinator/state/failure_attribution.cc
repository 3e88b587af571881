#include "coordinator/state/failure_attribution.h"

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

namespace {

int64_t LimitOf(const RankLiveness& r, int hang_timeout_s, int64_t startup_ms) {
  const int64_t limit = int64_t{hang_timeout_s} * 1000;
  return r.reported ? limit : std::max(limit, startup_ms);
}

}  // namespace

std::optional<Hang> DetectHang(const std::vector<RankLiveness>& ranks, int64_t now_ms,
                               int hang_timeout_s, int64_t startup_ms) {
  if (hang_timeout_s <= 0) return std::nullopt;
  std::vector<int> silent;
  std::vector<int> stopped;
  size_t alive = 0;
  for (const RankLiveness& r : ranks) {
    if (r.gone) continue;
    ++alive;
    if (now_ms - r.last_progress_ms >= LimitOf(r, hang_timeout_s, startup_ms)) {
      silent.push_back(r.rank);
    }
    // A rank whose process is stopped is the cause; peers waiting for it in a collective
    // fall silent too, possibly a moment earlier.
    if (r.stopped) stopped.push_back(r.rank);
  }
  if (silent.empty()) return std::nullopt;
  Hang hang;
  // Every silent rank is still to make its first report, and the startup allowance applied.
  bool starting = startup_ms > int64_t{hang_timeout_s} * 1000;
  for (const RankLiveness& r : ranks) {
    if (!r.gone && r.reported && std::find(silent.begin(), silent.end(), r.rank) != silent.end()) {
      starting = false;
    }
  }
  const int64_t startup_s = std::max<int64_t>(hang_timeout_s, startup_ms / 1000);
  hang.reason =
      starting ? "hung: nothing reported within " + std::to_string(startup_s) + " s of the start"
               : "hung: no progress for " + std::to_string(hang_timeout_s) + " s";
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

std::string RendezvousTimeoutReason(const std::vector<int>& not_started) {
  std::string missing;
  for (int rank : not_started) missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
  return "rendezvous timed out: rank(s) " + missing + " did not start";
}

void FailureAttribution::Report(v1::RankFailure failure) {
  if (pending_.empty()) window_end_ms_ = clock_->NowMonotonicMs() + window_ms_;
  pending_.push_back(std::move(failure));
}

v1::RankFailure FailureAttribution::Decisive(v1::RankFailure failure) {
  pending_.clear();
  return failure;
}

std::optional<v1::RankFailure> FailureAttribution::RootCause(
    const UnreachablePeerFn& unreachable_peer, bool all_reported) {
  if (pending_.empty()) return std::nullopt;
  v1::RankFailure cause = ChooseRootCause(pending_);
  if (clock_->NowMonotonicMs() < window_end_ms_ && !all_reported && CauseClass(cause) > 0) {
    return std::nullopt;
  }
  if (CauseClass(cause) > 0 && unreachable_peer) {
    if (auto peer = unreachable_peer()) cause = std::move(*peer);
  }
  return cause;
}

bool FailureAttribution::RendezvousOverdue() const {
  return pending_.empty() && rendezvous_deadline_ms_ > 0 &&
         clock_->NowMonotonicMs() >= rendezvous_deadline_ms_;
}

std::optional<Hang> FailureAttribution::CheckHang(const LivenessFn& ranks, int hang_timeout_s,
                                                  int64_t startup_ms) {
  const int64_t now = clock_->NowMonotonicMs();
  if (hang_timeout_s <= 0 || now < next_hang_check_ms_) return std::nullopt;
  const std::vector<RankLiveness> live = ranks();
  std::optional<Hang> hang = DetectHang(live, now, hang_timeout_s, startup_ms);
  if (hang) return hang;
  int64_t earliest = now + int64_t{hang_timeout_s} * 1000;
  for (const RankLiveness& r : live) {
    if (r.gone) continue;
    earliest = std::min(earliest, r.last_progress_ms + LimitOf(r, hang_timeout_s, startup_ms));
  }
  next_hang_check_ms_ = earliest;
  return std::nullopt;
}

}  // namespace convoy

#include "coordinator/state/metric_history.h"

#include <algorithm>
#include <utility>

namespace convoy {
namespace {

// Keeps the elements at even positions (0, 2, 4, ...), in order.
template <typename T>
void KeepEveryOther(google::protobuf::RepeatedPtrField<T>* field) {
  int kept = 0;
  for (int i = 0; i < field->size(); i += 2) field->SwapElements(kept++, i);
  field->DeleteSubrange(kept, field->size() - kept);
}

}  // namespace

int MetricHistory::PointsPerRank(int64_t ranks) {
  int64_t n = kPointsPerJob / std::max<int64_t>(ranks, 1);
  n = std::clamp<int64_t>(n, kMinPointsPerRank, kMaxPointsPerRank);
  return static_cast<int>(n & ~int64_t{1});
}

MetricHistory::MetricHistory(const std::string& job_id, int max_points) {
  h_.set_job_id(job_id);
  h_.set_max_points(std::max(4, max_points & ~1));
}

void MetricHistory::Restore(v1::JobMetrics stored) {
  const int max_points = stored.max_points() >= 4 ? stored.max_points() : h_.max_points();
  h_ = std::move(stored);
  h_.set_max_points(max_points & ~1);
  index_.clear();
  for (int i = 0; i < h_.ranks_size(); ++i) {
    v1::RankHistory& r = *h_.mutable_ranks(i);
    if (r.stride() < 1) r.set_stride(1);
    index_[r.rank()] = i;
  }
}

v1::RankHistory& MetricHistory::Rank(int rank) {
  auto [it, added] = index_.try_emplace(rank, h_.ranks_size());
  if (!added) return *h_.mutable_ranks(it->second);
  v1::RankHistory* r = h_.add_ranks();
  r->set_rank(rank);
  r->set_stride(1);
  return *r;
}

bool MetricHistory::Add(const v1::MetricRecord& rec, int attempt) {
  auto acc = rec.values().find("test_accuracy");
  if (rec.kind() == "eval" || acc != rec.values().end()) {
    v1::EvalPoint e;
    e.set_epoch(rec.epoch());
    e.set_step(rec.step());
    e.set_attempt(attempt);
    e.set_time_unix_ms(rec.time_unix_ms());
    if (acc != rec.values().end()) {
      e.set_test_accuracy(acc->second);
      e.set_has_test_accuracy(true);
    }
    if (auto tl = rec.values().find("test_loss"); tl != rec.values().end()) {
      e.set_test_loss(tl->second);
      e.set_has_test_loss(true);
    }
    auto* evals = Rank(rec.rank()).mutable_evals();
    v1::EvalPoint* prev = evals->empty() ? nullptr : evals->Mutable(evals->size() - 1);
    if (prev != nullptr && prev->attempt() == attempt && prev->epoch() == e.epoch()) {
      *prev = std::move(e);  // the same epoch evaluated again: the newer counts
    } else {
      *evals->Add() = std::move(e);
      if (evals->size() > h_.max_points()) KeepEveryOther(evals);
    }
    return true;
  }
  if (!rec.has_step() && !rec.has_loss()) return false;

  v1::MetricPoint p;
  p.set_step(rec.step());
  p.set_epoch(rec.epoch());
  p.set_attempt(attempt);
  p.set_time_unix_ms(rec.time_unix_ms());
  if (rec.has_loss()) {
    p.set_loss(rec.loss());
    p.set_has_loss(true);
  }
  if (auto rate = rec.values().find("samples_per_s"); rate != rec.values().end()) {
    p.set_samples_per_second(rate->second);
    p.set_has_samples_per_second(true);
  }
  v1::RankHistory& r = Rank(rec.rank());
  if (r.records() % r.stride() == 0) {
    *r.add_points() = std::move(p);
    r.clear_last();
    // max_points is even: the point just added sits at an even position and stays.
    if (r.points_size() > h_.max_points()) {
      KeepEveryOther(r.mutable_points());
      r.set_stride(r.stride() * 2);
    }
  } else {
    *r.mutable_last() = std::move(p);
  }
  r.set_records(r.records() + 1);
  return true;
}

v1::JobMetrics MetricHistory::Sorted() const {
  v1::JobMetrics out = h_;
  std::sort(out.mutable_ranks()->begin(), out.mutable_ranks()->end(),
            [](const v1::RankHistory& a, const v1::RankHistory& b) { return a.rank() < b.rank(); });
  return out;
}

}  // namespace convoy

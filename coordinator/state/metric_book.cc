#include "coordinator/state/metric_book.h"

namespace convoy {

void MetricBook::Rebuild(const v1::Job& job) {
  index_.clear();
  for (int i = 0; i < job.latest_size(); ++i) index_[job.latest(i).rank()] = i;
}

v1::MetricRecord MetricBook::Record(v1::Job* job, const v1::MetricRecord& in, int attempt) {
  v1::MetricRecord rec = in;
  rec.set_attempt(attempt);
  auto at = index_.find(rec.rank());
  if (at == index_.end()) {
    index_[rec.rank()] = job->latest_size();
    *job->add_latest() = rec;
    return rec;
  }
  v1::MetricRecord& old = *job->mutable_latest(at->second);
  if (old.attempt() == attempt) {
    // Keep values (e.g. test_accuracy) of earlier records unless this one updates them.
    for (const auto& [k, v] : old.values()) rec.mutable_values()->insert({k, v});
    for (const auto& [k, v] : in.values()) (*rec.mutable_values())[k] = v;
    if (!rec.has_loss() && old.has_loss()) {
      rec.set_loss(old.loss());  // an eval record carries no training loss
      rec.set_has_loss(true);
    }
  }
  old = rec;
  return rec;
}

}  // namespace convoy

#include "worker/supervise/metrics_relay.h"

#include <spdlog/spdlog.h>

namespace convoy {

MetricsRelay::MetricsRelay(Reporter& reporter, const Clock& clock)
    : reporter_(reporter), clock_(clock) {}

void MetricsRelay::OnReadable(Attempt& a, int fd) {
  if (a.metrics == nullptr) return;
  std::vector<v1::MetricRecord> records;
  const int64_t dropped_before = a.metrics->dropped();
  a.metrics->OnReadable(fd, a.RankOfPeer(), clock_.NowUnixMs(), &records);
  dropped_total_.fetch_add(a.metrics->dropped() - dropped_before, std::memory_order_relaxed);
  Add(a.key(), &records);
}

void MetricsRelay::Close(Attempt& a) {
  if (a.metrics == nullptr) return;
  std::vector<v1::MetricRecord> records;
  const int64_t dropped_before = a.metrics->dropped();
  a.metrics->Drain(a.RankOfPeer(), clock_.NowUnixMs(), &records);
  dropped_total_.fetch_add(a.metrics->dropped() - dropped_before, std::memory_order_relaxed);
  Add(a.key(), &records);
  a.metrics.reset();  // closes and removes the socket file
  Flush(true);
}

void MetricsRelay::Add(const AttemptKey& key, std::vector<v1::MetricRecord>* records) {
  received_total_.fetch_add(static_cast<int64_t>(records->size()), std::memory_order_relaxed);
  for (v1::MetricRecord& rec : *records) {
    rec.set_attempt(key.attempt);
    if (observer_) observer_(key, rec);
    pending_.push_back({key, std::move(rec)});
  }
  if (pending_.size() > kMaxPending) {
    const size_t excess = pending_.size() - kMaxPending;
    if (dropped_since_sent_ == 0) {
      spdlog::warn("more than {} metric records wait for the coordinator; dropping the oldest",
                   kMaxPending);
    }
    dropped_since_sent_ += static_cast<int64_t>(excess);
    dropped_total_.fetch_add(static_cast<int64_t>(excess), std::memory_order_relaxed);
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(excess));
  }
}

void MetricsRelay::Flush(bool force) {
  const int64_t now = clock_.NowMonotonicMs();
  if (!force && now < next_flush_ms_ && pending_.size() < kRecordsPerBatch) return;
  next_flush_ms_ = now + kFlushIntervalMs;
  // Consecutive records of one attempt make a batch; a batch the link refuses stays queued.
  while (!pending_.empty() && reporter_.LinkUp()) {
    v1::WorkerMessage out;
    v1::MetricBatch* b = out.mutable_metrics();
    const AttemptKey key = pending_.front().key;
    b->set_job_id(key.job_id);
    b->set_job_uid(key.job_uid);
    b->set_attempt(key.attempt);
    size_t n = 0;
    while (n < pending_.size() && n < kRecordsPerBatch && pending_[n].key == key) {
      *b->add_records() = pending_[n].record;
      ++n;
    }
    if (!reporter_.Send(out)) return;
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
  }
  if (pending_.empty() && dropped_since_sent_ > 0) {
    spdlog::warn("{} metric records were dropped while the coordinator was away",
                 dropped_since_sent_);
    dropped_since_sent_ = 0;
  }
}

int64_t MetricsRelay::NextDueMs() const {
  return reporter_.LinkUp() && !pending_.empty() ? next_flush_ms_ : Reporter::kNever;
}

}  // namespace convoy

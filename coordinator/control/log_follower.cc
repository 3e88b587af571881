#include "coordinator/control/log_follower.h"

#include <utility>

namespace convoy {

void LogFollower::Start(std::weak_ptr<void> anchor) {
  {
    MutexLock lock(mu_);
    anchor_ = std::move(anchor);
  }
  Next(false);
}

void LogFollower::Next(bool wait) {
  if (!sink_->Open()) return;
  int attempt;
  int64_t offset;
  std::weak_ptr<void> anchor;
  {
    MutexLock lock(mu_);
    attempt = attempt_;
    offset = offset_;
    anchor = anchor_;
  }
  auto asked = coordinator_.RequestLogs(options_.job_id, options_.rank, attempt, offset,
                                        options_.chunk_bytes, wait ? kFollowWaitMs : 0,
                                        [this, anchor](const StatusOr<v1::LogData>& data) {
                                          if (auto owner = anchor.lock()) OnData(data);
                                        });
  if (!asked.ok()) {
    bool first;
    {
      MutexLock lock(mu_);
      first = first_;
    }
    // Refused later on (the job's attempt went away): the log has ended.
    sink_->OnEnd(first ? asked.status() : Status::Ok());
    return;
  }
  MutexLock lock(mu_);
  attempt_ = asked->attempt;
  job_finished_ = asked->job_finished;
}

void LogFollower::OnData(const StatusOr<v1::LogData>& data) {
  if (!data.ok()) return sink_->OnEnd(data.status());
  if (!data->error().empty()) {
    // Logs removed by the worker's retention are no unknown job.
    return sink_->OnEnd(data->removed() ? Status::FailedPrecondition(data->error())
                                        : Status::NotFound(data->error()));
  }
  const bool full = static_cast<int>(data->data().size()) >= options_.chunk_bytes;
  bool finished;
  int attempt;
  {
    MutexLock lock(mu_);
    first_ = false;
    offset_ = data->next_offset();
    finished = job_finished_;
    attempt = attempt_;
  }
  const bool end = !full && (!options_.follow || data->eof() || (finished && data->data().empty()));
  Sink::After after = Sink::After::kNext;
  if (!data->data().empty()) {
    after = sink_->OnChunk(attempt, data->data(), end);
    if (after == Sink::After::kStop) return;
  }
  if (end) return sink_->OnEnd(Status::Ok());
  if (data->data().empty()) return Next(true);
  if (after == Sink::After::kNext) Next(false);
}

}  // namespace convoy

#include "coordinator/control/job_writer.h"

#include <spdlog/spdlog.h>

#include "coordinator/state/job_state_machine.h"

namespace convoy {

Status JobWriter::Transition(JobRecord& r, v1::JobState to, const std::string& reason,
                             const v1::RankFailure* failure) {
  const v1::JobState from = r.job.state();
  CONVOY_RETURN_IF_ERROR(CheckTransition(from, to, r.job.spec().has_sweep()));
  v1::JobEvent event;
  event.set_time_unix_ms(clock_.NowUnixMs());
  event.set_from(from);
  event.set_to(to);
  event.set_attempt(r.job.attempt());
  event.set_reason(reason);
  if (failure != nullptr) *event.mutable_failure() = *failure;

  v1::Job next = r.job;
  next.set_state(to);
  next.set_updated_unix_ms(event.time_unix_ms());
  next.set_message(reason);
  next.clear_events();
  Status st = store_.SaveJob(next, &event);
  if (!st.ok()) {
    spdlog::error("job {}: cannot persist {} -> {} ({}); not acting on it: {}", r.job.id(),
                  StateName(from), StateName(to), reason, st.message());
    return Status::Unavailable("cannot persist the transition: " + st.message());
  }
  // A finished job's history is final: written with its last transition's batch.
  if (IsTerminal(to) && table_.TakeHistoryDirty(r.job.id())) SaveHistory(r);
  *next.mutable_events() = std::move(*r.job.mutable_events());
  *next.add_events() = event;
  r.job = std::move(next);
  table_.MarkClean(r.job.id());
  table_.SetState(r.job.id(), from, to);
  if (IsTerminal(to)) stats_.Finished(r.job.id());
  spdlog::info("job {}: {} -> {}: {}", r.job.id(), StateName(from), StateName(to), reason);

  v1::WatchJobResponse ev;
  *ev.mutable_event() = event;
  watches_.Notify(r.job.id(), ev);
  v1::WatchJobResponse snap;
  *snap.mutable_job() = r.job;
  watches_.Notify(r.job.id(), snap);
  if (IsTerminal(to)) watches_.Close(r.job.id(), snap);
  on_transition_(r, from, to);
  return Status::Ok();
}

Status JobWriter::Note(JobRecord& r, const std::string& reason) {
  v1::JobEvent event;
  event.set_time_unix_ms(clock_.NowUnixMs());
  event.set_from(r.job.state());
  event.set_to(r.job.state());
  event.set_attempt(r.job.attempt());
  event.set_reason(reason);
  v1::Job copy = r.job;
  copy.set_updated_unix_ms(event.time_unix_ms());
  copy.clear_events();
  Status st = store_.SaveJob(copy, &event);
  if (!st.ok()) {
    spdlog::error("job {}: cannot persist an event ({}): {}", r.job.id(), reason, st.message());
    return Status::Unavailable("cannot persist the event: " + st.message());
  }
  r.job.set_updated_unix_ms(event.time_unix_ms());
  *r.job.add_events() = event;
  table_.MarkClean(r.job.id());
  spdlog::info("job {}: {}", r.job.id(), reason);
  v1::WatchJobResponse ev;
  *ev.mutable_event() = event;
  watches_.Notify(r.job.id(), ev);
  return Status::Ok();
}

void JobWriter::MarkChanged(JobRecord& r) {
  r.job.set_updated_unix_ms(clock_.NowUnixMs());
  table_.MarkDirty(r.job.id());
}

void JobWriter::Flush() {
  for (const std::string& id : table_.TakeDirty()) SaveNow(table_.at(id));
  const int64_t now = clock_.NowMonotonicMs();
  std::set<std::string>& history_dirty = table_.history_dirty();
  for (auto it = history_dirty.begin(); it != history_dirty.end();) {
    JobRecord& r = table_.at(*it);
    if (!IsTerminal(r.job.state()) && now - r.history_saved_mono_ms < history_save_interval_ms_) {
      ++it;
      continue;
    }
    SaveHistory(r);
    it = history_dirty.erase(it);
  }
}

void JobWriter::SaveHistory(JobRecord& r) {
  r.history_saved_mono_ms = clock_.NowMonotonicMs();
  Status st = store_.SaveJobMetrics(r.history.history());
  if (!st.ok()) {
    spdlog::error("job {}: cannot persist its metric history: {}", r.job.id(), st.message());
  }
}

void JobWriter::SaveNow(JobRecord& r) {
  r.job.set_updated_unix_ms(clock_.NowUnixMs());
  v1::Job copy = r.job;
  copy.clear_events();
  Status st = store_.SaveJob(copy, nullptr);
  if (!st.ok()) spdlog::error("job {}: cannot persist: {}", r.job.id(), st.message());
}

}  // namespace convoy

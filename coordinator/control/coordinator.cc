#include "coordinator/control/coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <type_traits>

#include "coordinator/state/job_state_machine.h"

namespace convoy {

// ---- The write-behind store and the stream channel (called by JobManager, mu_ held)

Status Coordinator::WriteBehindStore::SaveJob(const v1::Job& job, const v1::JobEvent* event) {
  c_.mu_.AssertHeld();
  StoreWrite w;
  w.job = job;
  w.job->clear_events();  // the store keeps the log itself
  if (event != nullptr) w.event = *event;
  c_.effects_.writes.push_back(std::move(w));
  return Status::Ok();
}

StatusOr<std::vector<v1::Job>> Coordinator::WriteBehindStore::LoadJobs() {
  return c_.durable_.LoadJobs();
}

Status Coordinator::WriteBehindStore::SaveWorker(const v1::WorkerInfo& worker) {
  c_.mu_.AssertHeld();
  StoreWrite w;
  w.worker = worker;
  c_.effects_.writes.push_back(std::move(w));
  return Status::Ok();
}

StatusOr<std::vector<v1::WorkerInfo>> Coordinator::WriteBehindStore::LoadWorkers() {
  return c_.durable_.LoadWorkers();
}

Status Coordinator::WriteBehindStore::DeleteWorker(const std::string& name) {
  c_.mu_.AssertHeld();
  StoreWrite w;
  w.delete_worker = name;
  c_.effects_.writes.push_back(std::move(w));
  return Status::Ok();
}

Status Coordinator::WriteBehindStore::SaveJobMetrics(const v1::JobMetrics& job_metrics) {
  c_.mu_.AssertHeld();
  StoreWrite w;
  w.job_metrics = job_metrics;
  c_.effects_.writes.push_back(std::move(w));
  return Status::Ok();
}

StatusOr<std::vector<v1::JobMetrics>> Coordinator::WriteBehindStore::LoadJobMetrics() {
  return c_.durable_.LoadJobMetrics();
}

Status Coordinator::WriteBehindStore::DeleteJob(const std::string& id) {
  c_.mu_.AssertHeld();
  StoreWrite w;
  w.delete_job = id;
  c_.effects_.writes.push_back(std::move(w));
  return Status::Ok();
}

Status Coordinator::WriteBehindStore::SaveFileDeletion(const FileDeletion& deletion, bool pending) {
  c_.mu_.AssertHeld();
  StoreWrite w;
  w.file_deletion = deletion;
  w.file_deletion_pending = pending;
  c_.effects_.writes.push_back(std::move(w));
  return Status::Ok();
}

StatusOr<std::vector<FileDeletion>> Coordinator::WriteBehindStore::LoadFileDeletions() {
  return c_.durable_.LoadFileDeletions();
}

bool Coordinator::StreamChannel::Send(const std::string& name, const v1::CoordinatorMessage& msg) {
  c_.mu_.AssertHeld();
  auto it = c_.streams_.find(name);
  if (it == c_.streams_.end()) return false;
  c_.effects_.sends.emplace_back(it->second, msg);
  return true;
}

// ---- Life cycle

template <typename F>
auto Coordinator::Locked(F&& f) {
  MutexLock lock(mu_);
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    Seal();
  } else {
    auto result = f();
    Seal();
    return result;
  }
}

Coordinator::Coordinator(const Clock& clock, JobStore& store, CoordinatorOptions options)
    : clock_(clock),
      durable_(store),
      options_(options),
      registry_(clock, options.worker_timeout_ms),
      jobs_(clock, write_behind_, registry_, channel_, options.jobs) {}

Coordinator::~Coordinator() { Stop(); }

Status Coordinator::Start() {
  Status st = Locked([&] {
    mu_.AssertHeld();
    return jobs_.Recover();
  });
  if (!st.ok()) return st;
  started_ = true;
  commit_thread_ = std::thread([this] { CommitLoop(); });
  if (options_.run_ticker) ticker_thread_ = std::thread([this] { TickerLoop(); });
  return Status::Ok();
}

void Coordinator::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  {
    MutexLock lock(ticker_mu_);
    ticker_stop_ = true;
    ticker_cv_.SignalAll();
  }
  if (ticker_thread_.joinable()) ticker_thread_.join();
  std::map<std::string, std::shared_ptr<WorkerStream>> streams;
  {
    MutexLock lock(mu_);
    streams.swap(streams_);
  }
  for (auto& [name, stream] : streams) stream->Close("the coordinator is shutting down");
  {
    MutexLock lock(commit_mu_);
    stopping_ = true;
    commit_cv_.SignalAll();
  }
  if (commit_thread_.joinable()) commit_thread_.join();
}

// ---- Locked sections and the commit thread

void Coordinator::Seal() {
  if (effects_.empty()) return;
  MutexLock lock(commit_mu_);
  queue_.push_back(std::move(effects_));
  effects_ = Effects();
  ++sealed_;
  commit_cv_.Signal();
}

void Coordinator::CommitLoop() {
  for (;;) {
    std::deque<Effects> batch;
    {
      MutexLock lock(commit_mu_);
      while (queue_.empty() && !stopping_) commit_cv_.Wait(commit_mu_);
      if (queue_.empty() && stopping_) return;
      batch.swap(queue_);
    }
    std::vector<StoreWrite> writes;
    for (Effects& e : batch) {
      for (StoreWrite& w : e.writes) writes.push_back(std::move(w));
    }
    if (!writes.empty() && !Persist(writes)) return;
    for (Effects& e : batch) {
      for (auto& [stream, msg] : e.sends) stream->Enqueue(msg);
      for (auto& fn : e.after) fn();
    }
    MutexLock lock(commit_mu_);
    done_ += batch.size();
    flushed_cv_.SignalAll();
  }
}

bool Coordinator::Persist(std::vector<StoreWrite>& writes) {
  using Steady = std::chrono::steady_clock;
  int failures = 0;
  const Steady::time_point first = Steady::now();
  for (;;) {
    // Real elapsed time for the store-latency histogram; no decision depends on it.
    const Steady::time_point began = Steady::now();
    Status st = durable_.Write(writes);
    if (!st.ok() || failures > 0) {  // the common case, a first write that worked, locks nothing
      MutexLock lock(commit_mu_);
      store_refusing_ = st.ok() ? "" : st.message();
    }
    if (st.ok()) {
      if (failures > 0) {
        spdlog::info(
            "the store accepts writes again ({} change(s) persisted after {} ms)", writes.size(),
            std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - first).count());
      }
      if (on_commit_) {
        on_commit_(std::chrono::duration<double>(Steady::now() - began).count(), writes.size());
      }
      return true;
    }
    const int64_t failing_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - first).count();
    if (failing_ms >= options_.store_give_up_ms) {
      const std::string why = fmt::format(
          "the durable store has failed for {} ms ({} change(s) not persisted): {}; stopping "
          "the coordinator (crash-only: restarted, it resumes from what was persisted)",
          failing_ms, writes.size(), st.message());
      if (!options_.on_store_lost) {
        spdlog::critical("{}", why);
        spdlog::default_logger()->flush();
        std::_Exit(1);
      }
      options_.on_store_lost(why);
      MutexLock lock(commit_mu_);
      store_lost_ = true;  // Flush returns from here on
      flushed_cv_.SignalAll();
      return false;
    }
    if (failures++ % 30 == 0) {
      spdlog::error(
          "cannot persist {} change(s): {}; holding their messages and replies, retrying "
          "every second (giving up after {} s)",
          writes.size(), st.message(), options_.store_give_up_ms / 1000);
    }
    MutexLock lock(commit_mu_);
    if (stopping_) {
      spdlog::error("shutting down with {} change(s) not persisted", writes.size());
      return false;
    }
    commit_cv_.WaitFor(commit_mu_, std::chrono::milliseconds(std::min<int64_t>(
                                       1000, options_.store_give_up_ms - failing_ms)));
  }
}

Status Coordinator::StoreAcceptsWrites() {
  MutexLock lock(commit_mu_);
  if (store_refusing_.empty()) return Status::Ok();
  return Status::Unavailable("the coordinator's store refuses writes now (" + store_refusing_ +
                             "); nothing was changed: retry once it is back");
}

bool Coordinator::Settled() {
  if (!effects_.empty()) return false;
  MutexLock lock(commit_mu_);
  return done_ == sealed_;
}

void Coordinator::Flush() {
  MutexLock lock(commit_mu_);
  const uint64_t target = sealed_;
  while (done_ < target && !stopping_ && !store_lost_) flushed_cv_.Wait(commit_mu_);
}

void Coordinator::TickerLoop() {
  int64_t next_export = clock_.NowMonotonicMs();
  for (;;) {
    {
      MutexLock lock(ticker_mu_);
      if (ticker_stop_) return;
      ticker_cv_.WaitFor(ticker_mu_, std::chrono::milliseconds(options_.tick_ms));
      if (ticker_stop_) return;
    }
    Tick();
    ticks_.fetch_add(1, std::memory_order_relaxed);
    if (on_export_ && clock_.NowMonotonicMs() >= next_export) {
      next_export = clock_.NowMonotonicMs() + options_.export_interval_ms;
      ExportSnapshot snap;
      {
        MutexLock lock(mu_);
        snap.stats = jobs_.GetStats();
        snap.active = jobs_.ListActive();
        snap.finished = jobs_.TakeFinished();
        snap.workers = registry_.List();
        snap.durations = jobs_.TakeDurations();
      }
      on_export_(snap);
    }
  }
}

void Coordinator::Tick() {
  Locked([&] {
    mu_.AssertHeld();
    jobs_.Tick();
  });
}

// ---- Clients

void Coordinator::Submit(const v1::JobSpec& spec, const std::string& owner, const std::string& role,
                         const std::string& request_id,
                         std::function<void(StatusOr<std::string>)> done) {
  if (RefusedWhileTheStoreFails(done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<std::string> id = jobs_.Submit(spec, owner, role, request_id);
    Defer([done = std::move(done), id = std::move(id)] { done(id); });
  });
}

void Coordinator::Cancel(const std::string& id, const std::string& reason, const std::string& by,
                         std::function<void(StatusOr<v1::Job>)> done) {
  if (RefusedWhileTheStoreFails(done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<v1::Job> job = jobs_.Cancel(id, reason, by);
    Defer([done = std::move(done), job = std::move(job)] { done(job); });
  });
}

void Coordinator::Delete(const std::string& id, const std::string& by,
                         std::function<void(StatusOr<std::vector<std::string>>)> done) {
  if (RefusedWhileTheStoreFails(done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<std::vector<std::string>> workers = jobs_.Delete(id, by);
    Defer([done = std::move(done), workers = std::move(workers)] { done(workers); });
  });
}

void Coordinator::SetDrained(const std::string& worker, bool drained, const std::string& by,
                             bool now, std::function<void(StatusOr<v1::WorkerInfo>)> done) {
  if (RefusedWhileTheStoreFails(done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<v1::WorkerInfo> info = jobs_.SetDrained(worker, drained, by, now);
    Defer([done = std::move(done), info = std::move(info)] { done(info); });
  });
}

void Coordinator::ForgetWorker(const std::string& worker, const std::string& by,
                               std::function<void(StatusOr<JobManager::ForgottenWorker>)> done) {
  if (RefusedWhileTheStoreFails(done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<JobManager::ForgottenWorker> forgotten =
        jobs_.ForgetWorker(worker, by, streams_.count(worker) > 0);
    Defer([done = std::move(done), forgotten = std::move(forgotten)] { done(forgotten); });
  });
}

StatusOr<v1::Job> Coordinator::Get(const std::string& id) {
  MutexLock lock(mu_);
  return jobs_.Get(id);
}

template <typename T>
void Coordinator::AnswerCommitted(const std::function<T()>& read, std::function<void(T)> done) {
  std::optional<T> now;
  Locked([&] {
    mu_.AssertHeld();
    T value = read();
    if (Settled()) {
      now = std::move(value);
    } else {
      Defer([done, value = std::move(value)] { done(value); });
    }
  });
  if (now.has_value()) done(std::move(*now));
}

void Coordinator::GetCommitted(const std::string& id, std::function<void(StatusOr<v1::Job>)> done) {
  AnswerCommitted<StatusOr<v1::Job>>(
      [&] {
        mu_.AssertHeld();
        return jobs_.Get(id);
      },
      std::move(done));
}

StatusOr<v1::JobMetrics> Coordinator::GetMetrics(const std::string& id) {
  MutexLock lock(mu_);
  return jobs_.GetMetrics(id);
}

std::vector<v1::Job> Coordinator::List(bool full) {
  MutexLock lock(mu_);
  return jobs_.List(full);
}

JobManager::JobPage Coordinator::ListPage(const JobQuery& query) {
  MutexLock lock(mu_);
  return jobs_.ListPage(query);
}

void Coordinator::ListPageCommitted(const JobQuery& query,
                                    std::function<void(JobManager::JobPage)> done) {
  AnswerCommitted<JobManager::JobPage>(
      [&] {
        mu_.AssertHeld();
        return jobs_.ListPage(query);
      },
      std::move(done));
}

std::set<std::string> Coordinator::ReferencedCode() {
  MutexLock lock(mu_);
  return jobs_.ReferencedCode();
}

std::vector<v1::WorkerInfo> Coordinator::ListWorkers() {
  MutexLock lock(mu_);
  return jobs_.ListWorkers();
}

JobManager::WorkerPage Coordinator::ListWorkersPage(const WorkerQuery& query) {
  MutexLock lock(mu_);
  return jobs_.ListWorkersPage(query);
}

JobManager::Stats Coordinator::GetStats() {
  MutexLock lock(mu_);
  return jobs_.GetStats();
}

StatusOr<uint64_t> Coordinator::Watch(const std::string& id, JobManager::WatchFn fn) {
  auto shared = std::make_shared<JobManager::WatchFn>(std::move(fn));
  return Locked([&] {
    mu_.AssertHeld();
    // JobManager calls this with mu_ held, inside a locked section: hand each update to the
    // commit thread, in order, after what it reports is durable.
    return jobs_.Watch(id, [this, shared](const v1::WatchJobResponse& update, bool done) {
      mu_.AssertHeld();
      Defer([shared, update, done] { (*shared)(update, done); });
    });
  });
}

void Coordinator::Unwatch(uint64_t watch_id) {
  MutexLock lock(mu_);
  jobs_.Unwatch(watch_id);
}

StatusOr<Coordinator::LogRequest> Coordinator::RequestLogs(const std::string& id, int rank,
                                                           int attempt, int64_t offset,
                                                           int max_bytes, int wait_ms,
                                                           JobManager::LogFn fn) {
  auto shared = std::make_shared<JobManager::LogFn>(std::move(fn));
  return Locked([&]() -> StatusOr<LogRequest> {
    mu_.AssertHeld();
    auto asked = jobs_.RequestLogs(id, rank, attempt, offset, max_bytes, wait_ms,
                                   [this, shared](const StatusOr<v1::LogData>& data) {
                                     mu_.AssertHeld();
                                     Defer([shared, data] { (*shared)(data); });
                                   });
    if (!asked.ok()) return asked.status();
    LogRequest out;
    out.attempt = *asked;
    auto job = jobs_.Get(id);
    out.job_finished = job.ok() && IsTerminal(job->state());
    return out;
  });
}

// ---- Workers

void Coordinator::OnRegister(const v1::Register& reg, std::shared_ptr<WorkerStream> stream) {
  std::shared_ptr<WorkerStream> replaced;
  Locked([&] {
    mu_.AssertHeld();
    auto it = streams_.find(reg.name());
    if (it != streams_.end() && it->second != stream) replaced = it->second;
    streams_[reg.name()] = stream;
    // The ack goes first on the new stream, before anything OnRegister decides to send.
    const size_t first = effects_.sends.size();
    v1::CoordinatorMessage ack;
    *ack.mutable_register_ack() = jobs_.OnRegister(reg);
    effects_.sends.insert(effects_.sends.begin() + static_cast<std::ptrdiff_t>(first),
                          {stream, std::move(ack)});
    if (replaced) {
      spdlog::warn("worker {} connected again; closing its previous stream", reg.name());
      Defer([replaced] { replaced->Close("replaced by a newer stream of the same worker"); });
    }
  });
}

void Coordinator::OnWorkerMessage(const std::string& worker, const v1::WorkerMessage& msg) {
  Locked([&] {
    mu_.AssertHeld();
    if (jobs_.IsLost(worker)) {
      // Declared lost while its stream lived on (its heartbeats came too late): its ranks
      // were failed. Ending the stream makes it register again, reporting what it still
      // runs, and the usual reconciliation brings it back instead of leaving it LOST.
      auto it = streams_.find(worker);
      if (it != streams_.end()) {
        std::shared_ptr<WorkerStream> stream = it->second;
        streams_.erase(it);
        spdlog::warn(
            "worker {} was declared lost but is still talking; asking it to register again",
            worker);
        Defer([stream] { stream->Close("declared lost; register again"); });
      }
      return;
    }
    jobs_.OnWorkerMessage(worker, msg);
  });
}

void Coordinator::OnStreamClosed(const std::string& worker, const WorkerStream* stream) {
  Locked([&] {
    mu_.AssertHeld();
    auto it = streams_.find(worker);
    if (it == streams_.end() || it->second.get() != stream) return;
    streams_.erase(it);
    spdlog::warn("worker {}: stream closed", worker);
    jobs_.OnDisconnect(worker);
  });
}

size_t Coordinator::ConnectedWorkers() {
  MutexLock lock(mu_);
  return streams_.size();
}

bool Coordinator::WorkerConnected(const std::string& name) {
  MutexLock lock(mu_);
  return streams_.count(name) > 0;
}

}  // namespace convoy

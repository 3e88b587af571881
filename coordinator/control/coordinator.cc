#include "coordinator/control/coordinator.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <type_traits>
#include <utility>

#include "coordinator/state/job_state_machine.h"

namespace convoy {

// ---- Life cycle

template <typename F>
auto Coordinator::Locked(F&& f) {
  MutexLock lock(mu_);
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    pipeline_.Queue(std::exchange(effects_, Effects()));
  } else {
    auto result = f();
    pipeline_.Queue(std::exchange(effects_, Effects()));
    return result;
  }
}

Coordinator::Coordinator(const Clock& clock, JobStore& store, CoordinatorOptions options)
    : clock_(clock),
      options_(options),
      write_behind_(store, mu_, effects_),
      channel_(streams_, mu_, effects_),
      registry_(clock, options.worker_timeout_ms),
      jobs_(clock, write_behind_, registry_, channel_, options.jobs),
      pipeline_(store, {options.store_give_up_ms, options.on_store_lost}) {}

Coordinator::~Coordinator() {
  Stop();
  // The last locked section of a gRPC callback (a stream's OnDone) ends before the server is
  // destroyed, which the server's destructor waits for inside uninstrumented gRPC: taking the
  // lock once more orders it before the members are destroyed, for ThreadSanitizer too.
  MutexLock lock(mu_);
}

Status Coordinator::Start() {
  Status st = Locked([&] {
    mu_.AssertHeld();
    return jobs_.Recover();
  });
  if (!st.ok()) return st;
  started_ = true;
  pipeline_.Start();
  if (options_.run_ticker) {
    std::function<void()> export_snapshot;
    if (on_export_) {
      // Copied under the state lock in O(active jobs + workers), exported after it.
      export_snapshot = [this] {
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
      };
    }
    ticker_ = std::make_unique<Ticker>(
        clock_, Ticker::Options{options_.tick_ms, options_.export_interval_ms}, [this] { Tick(); },
        std::move(export_snapshot));
    ticker_->Start();
  }
  return Status::Ok();
}

void Coordinator::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  if (ticker_) ticker_->Stop();
  for (auto& [name, stream] : streams_.TakeAll()) {
    stream->Close("the coordinator is shutting down");
  }
  pipeline_.Stop();
}

// ---- Locked sections

void Coordinator::Flush() { pipeline_.Flush(); }

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
  if (RefusedWhileTheStoreFails(pipeline_, done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<std::string> id = jobs_.Submit(spec, owner, role, request_id);
    effects_.after.push_back([done = std::move(done), id = std::move(id)] { done(id); });
  });
}

void Coordinator::Cancel(const std::string& id, const std::string& reason, const std::string& by,
                         std::function<void(StatusOr<v1::Job>)> done, bool cascade) {
  if (RefusedWhileTheStoreFails(pipeline_, done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<v1::Job> job = jobs_.Cancel(id, reason, by, cascade);
    effects_.after.push_back([done = std::move(done), job = std::move(job)] { done(job); });
  });
}

void Coordinator::Delete(const std::string& id, const std::string& by,
                         std::function<void(StatusOr<std::vector<std::string>>)> done) {
  if (RefusedWhileTheStoreFails(pipeline_, done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<std::vector<std::string>> workers = jobs_.Delete(id, by);
    effects_.after.push_back(
        [done = std::move(done), workers = std::move(workers)] { done(workers); });
  });
}

void Coordinator::SetDrained(const std::string& worker, bool drained, const std::string& by,
                             bool now, std::function<void(StatusOr<v1::WorkerInfo>)> done) {
  if (RefusedWhileTheStoreFails(pipeline_, done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<v1::WorkerInfo> info = jobs_.SetDrained(worker, drained, by, now);
    effects_.after.push_back([done = std::move(done), info = std::move(info)] { done(info); });
  });
}

void Coordinator::SetCordoned(const std::string& worker, bool cordoned, const std::string& reason,
                              const std::string& by,
                              std::function<void(StatusOr<v1::WorkerInfo>)> done) {
  if (RefusedWhileTheStoreFails(pipeline_, done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<v1::WorkerInfo> info = jobs_.SetCordoned(worker, cordoned, reason, by);
    effects_.after.push_back([done = std::move(done), info = std::move(info)] { done(info); });
  });
}

void Coordinator::ForgetWorker(const std::string& worker, const std::string& by,
                               std::function<void(StatusOr<JobManager::ForgottenWorker>)> done) {
  if (RefusedWhileTheStoreFails(pipeline_, done)) return;
  Locked([&] {
    mu_.AssertHeld();
    StatusOr<JobManager::ForgottenWorker> forgotten =
        jobs_.ForgetWorker(worker, by, streams_.Connected(worker));
    effects_.after.push_back(
        [done = std::move(done), forgotten = std::move(forgotten)] { done(forgotten); });
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
    if (effects_.empty() && pipeline_.Idle()) {
      now = std::move(value);
    } else {
      effects_.after.push_back([done, value = std::move(value)] { done(value); });
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

StatusOr<uint64_t> Coordinator::Watch(const std::string& id, JobManager::WatchFn fn) {
  auto shared = std::make_shared<JobManager::WatchFn>(std::move(fn));
  return Locked([&] {
    mu_.AssertHeld();
    // JobManager calls this with mu_ held, inside a locked section: hand each update to the
    // commit thread, in order, after what it reports is durable.
    return jobs_.Watch(id, [this, shared](const v1::WatchJobResponse& update, bool done) {
      mu_.AssertHeld();
      effects_.after.push_back([shared, update, done] { (*shared)(update, done); });
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
                                     effects_.after.push_back([shared, data] { (*shared)(data); });
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
    replaced = streams_.Bind(reg.name(), stream);
    // The ack goes first on the new stream, before anything OnRegister decides to send.
    const size_t first = effects_.sends.size();
    v1::CoordinatorMessage ack;
    *ack.mutable_register_ack() = jobs_.OnRegister(reg);
    effects_.sends.insert(effects_.sends.begin() + static_cast<std::ptrdiff_t>(first),
                          {stream, std::move(ack)});
    if (replaced) {
      spdlog::warn("worker {} connected again; closing its previous stream", reg.name());
      effects_.after.push_back(
          [replaced] { replaced->Close("replaced by a newer stream of the same worker"); });
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
      if (std::shared_ptr<WorkerStream> stream = streams_.Drop(worker)) {
        spdlog::warn(
            "worker {} was declared lost but is still talking; asking it to register again",
            worker);
        effects_.after.push_back([stream] { stream->Close("declared lost; register again"); });
      }
      return;
    }
    jobs_.OnWorkerMessage(worker, msg);
  });
}

void Coordinator::OnStreamClosed(const std::string& worker, const WorkerStream* stream) {
  Locked([&] {
    mu_.AssertHeld();
    if (!streams_.Unbind(worker, stream)) return;
    spdlog::warn("worker {}: stream closed", worker);
    jobs_.OnDisconnect(worker);
  });
}

}  // namespace convoy

// JobService's two streaming calls (grpc_service.h): WatchJob, whose updates the
// Coordinator's commit thread pushes, and GetLogs, whose chunks are asked of the worker one at
// a time.
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <utility>

#include "common/mutex.h"
#include "coordinator/control/log_follower.h"
#include "coordinator/rpc/grpc_service.h"

namespace convoy {
namespace {

// ---- JobService.WatchJob: updates pushed by the Coordinator's commit thread.

class WatchReactor final : public grpc::ServerWriteReactor<v1::WatchJobResponse> {
 public:
  using Out = Outbound<v1::WatchJobResponse, WatchReactor>;

  WatchReactor(Coordinator& coordinator, Authorizer& auth, grpc::CallbackServerContext* context,
               const std::string& job_id, size_t limit, std::shared_ptr<void> slot,
               const Principal& who)
      : coordinator_(coordinator),
        out_(std::make_shared<Out>(this, context, limit)),
        slot_(std::move(slot)) {
    auth.OnRevoked(slot_, Closer(who.token_id));
    std::shared_ptr<Out> out = out_;
    // Updates come one at a time from the commit thread; the job (the first update, and
    // every state change) says whose it is, for the events between.
    auto owner = std::make_shared<std::string>();
    auto id = coordinator_.Watch(job_id, [out, job_id, who, owner](
                                             const v1::WatchJobResponse& given, bool done) {
      const bool redacted = given.has_job() || (given.has_event() && given.event().has_failure());
      v1::WatchJobResponse copy;
      if (given.has_job()) {
        *owner = given.job().owner();
        copy = given;
        Authorizer::Redact(who, copy.mutable_job());
      } else if (redacted) {
        copy = given;
        Authorizer::Redact(who, *owner, copy.mutable_event());
      }
      const v1::WatchJobResponse& update = redacted ? copy : given;
      if (out->Enqueue(update) == Out::Push::kOverflow) {
        spdlog::warn("watch of job {}: the client does not read; dropped", job_id);
      }
      if (done) out->Finish(grpc::Status::OK);
    });
    if (!id.ok()) {
      out_->Finish(ToGrpc(id.status()));
    } else {
      watch_id_ = *id;
    }
  }

  // Ends the watch when its token is revoked (Authorizer::OnRevoked); safe after OnDone.
  std::function<void()> Closer(const std::string& token_id) {
    std::weak_ptr<Out> weak = out_;
    return [weak, token_id] {
      if (auto out = weak.lock()) {
        out->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                 "token " + token_id + " was revoked or expired"));
      }
    };
  }

  void OnWriteDone(bool ok) override { out_->WriteDone(ok); }
  void OnCancel() override { out_->Abort(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")); }
  void OnDone() override {
    if (watch_id_ != 0) coordinator_.Unwatch(watch_id_);
    out_->Detach();
    delete this;
  }

 private:
  Coordinator& coordinator_;
  std::shared_ptr<Out> out_;
  std::shared_ptr<void> slot_;  // the caller's stream quota, given back when the call ends
  uint64_t watch_id_ = 0;
};

// ---- JobService.GetLogs: chunks asked of the worker one at a time; with follow, each
// request waits on the worker until bytes arrive (ReadLogs.wait_ms), so nothing polls.

class LogsReactor;

class LogsCall : public std::enable_shared_from_this<LogsCall>, public LogFollower::Sink {
 public:
  static constexpr int kChunk = 256 * 1024;
  using Out = Outbound<v1::LogChunk, LogsReactor>;

  LogsCall(Coordinator& coordinator, LogsReactor* reactor, grpc::CallbackServerContext* context,
           const v1::GetLogsRequest& req)
      : rank_(req.rank()),
        out_(reactor, context, 4),
        follower_(coordinator,
                  {req.job_id(), req.rank(), req.has_attempt() ? req.attempt() : -1, req.follow(),
                   req.tail_bytes(), kChunk},
                  this) {}

  Out& out() { return out_; }
  void Start() { follower_.Start(weak_from_this()); }

  // The reactor's OnWriteDone: the next chunk is asked for once the last one is written.
  void WriteDone(bool ok) EXCLUDES(mu_) {
    out_.WriteDone(ok);
    bool next = false;
    {
      MutexLock lock(mu_);
      next = ok && next_after_write_;
      next_after_write_ = false;
    }
    if (next) follower_.Next(false);
  }

 private:
  After OnChunk(int attempt, std::string data, bool last) EXCLUDES(mu_) override {
    v1::LogChunk chunk;
    chunk.set_rank(rank_);
    chunk.set_attempt(attempt);
    chunk.set_data(std::move(data));
    if (!last) {
      MutexLock lock(mu_);
      next_after_write_ = true;
    }
    return out_.Enqueue(std::move(chunk)) == Out::Push::kQueued ? After::kReaderAsks : After::kStop;
  }
  void OnEnd(const Status& status) override { out_.Finish(ToGrpc(status)); }

  const int rank_;
  Out out_;
  LogFollower follower_;
  Mutex mu_;
  bool next_after_write_ GUARDED_BY(mu_) = false;
};

class LogsReactor final : public grpc::ServerWriteReactor<v1::LogChunk> {
 public:
  LogsReactor(Coordinator& coordinator, Authorizer& auth, grpc::CallbackServerContext* context,
              const v1::GetLogsRequest& req, std::shared_ptr<void> slot,
              const std::string& token_id)
      : call_(std::make_shared<LogsCall>(coordinator, this, context, req)), slot_(std::move(slot)) {
    auth.OnRevoked(slot_, Closer(token_id));
    call_->Start();
  }
  // Ends the stream when its token is revoked (Authorizer::OnRevoked); safe after OnDone.
  std::function<void()> Closer(const std::string& token_id) {
    std::weak_ptr<LogsCall> weak = call_;
    return [weak, token_id] {
      if (auto call = weak.lock()) {
        call->out().Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                        "token " + token_id + " was revoked or expired"));
      }
    };
  }
  void OnWriteDone(bool ok) override { call_->WriteDone(ok); }
  void OnCancel() override {
    call_->out().Abort(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  void OnDone() override {
    call_->out().Detach();
    delete this;
  }

 private:
  std::shared_ptr<LogsCall> call_;
  std::shared_ptr<void> slot_;
};

}  // namespace

grpc::ServerWriteReactor<v1::WatchJobResponse>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* req) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/WatchJob");
  if (!who.ok()) return new RefusedWrite<v1::WatchJobResponse>(who.status());
  auto slot = auth_.AcquireStream(*who);
  if (!slot.ok()) return new RefusedWrite<v1::WatchJobResponse>(slot.status());
  return new WatchReactor(coordinator_, auth_, context, req->job_id(), limits_.watch_queue,
                          std::move(*slot), *who);
}

grpc::ServerWriteReactor<v1::LogChunk>* JobServiceImpl::GetLogs(
    grpc::CallbackServerContext* context, const v1::GetLogsRequest* req) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/GetLogs");
  if (!who.ok()) return new RefusedWrite<v1::LogChunk>(who.status());
  if (!who->admin()) {
    auto job = coordinator_.Get(req->job_id());
    if (!job.ok()) return new RefusedWrite<v1::LogChunk>(job.status());
    Status mine = Authorizer::CheckOwner(*who, *job, Right::kLogsRead);
    if (!mine.ok()) return new RefusedWrite<v1::LogChunk>(mine);
  }
  auto slot = auth_.AcquireStream(*who);
  if (!slot.ok()) return new RefusedWrite<v1::LogChunk>(slot.status());
  return new LogsReactor(coordinator_, auth_, context, *req, std::move(*slot), who->token_id);
}

}  // namespace convoy

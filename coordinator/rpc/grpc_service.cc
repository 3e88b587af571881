#include "coordinator/rpc/grpc_service.h"

#include <spdlog/spdlog.h>

#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "common/code_archive.h"
#include "common/mutex.h"
#include "common/util.h"

namespace convoy {

grpc::Status ToGrpc(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kInvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, status.message()};
    case StatusCode::kNotFound:
      return {grpc::StatusCode::NOT_FOUND, status.message()};
    case StatusCode::kAlreadyExists:
      return {grpc::StatusCode::ALREADY_EXISTS, status.message()};
    case StatusCode::kFailedPrecondition:
      return {grpc::StatusCode::FAILED_PRECONDITION, status.message()};
    case StatusCode::kUnavailable:
      return {grpc::StatusCode::UNAVAILABLE, status.message()};
    case StatusCode::kInternal:
      return {grpc::StatusCode::INTERNAL, status.message()};
    case StatusCode::kUnauthenticated:
      return {grpc::StatusCode::UNAUTHENTICATED, status.message()};
    case StatusCode::kPermissionDenied:
      return {grpc::StatusCode::PERMISSION_DENIED, status.message()};
    case StatusCode::kResourceExhausted:
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, status.message()};
  }
  return {grpc::StatusCode::UNKNOWN, status.message()};
}

namespace {

// The outgoing side of one streaming call: a bounded queue with at most one write in
// flight, and the call's end. Every method may be called from any thread. Decisions are
// made under mu_; the reactor operation they lead to (StartWrite, Finish, TryCancel) is
// started after mu_ is released, "pinned" so that OnDone (Detach) waits for it: the
// reactor and its context are never touched after OnDone.
template <typename Msg, typename Reactor>
class Outbound {
 public:
  enum class Push { kQueued, kClosed, kOverflow };

  Outbound(Reactor* reactor, grpc::CallbackServerContext* context, size_t limit)
      : reactor_(reactor), context_(context), limit_(limit) {}

  // Queues `msg`. kOverflow: the queue was full, so the call is ended with
  // RESOURCE_EXHAUSTED and cancelled (a write the client never reads would never finish).
  Push Enqueue(Msg msg) EXCLUDES(mu_) {
    Action a;
    Push result = Push::kQueued;
    {
      MutexLock lock(mu_);
      if (closing_) return Push::kClosed;
      if (queue_.size() >= limit_) {
        closing_ = true;
        queue_.clear();
        status_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                               "the client did not read fast enough");
        a.cancel = true;
        result = Push::kOverflow;
      } else {
        queue_.push_back(std::move(msg));
      }
      Next(a);
    }
    Run(a);
    return result;
  }

  // The reactor's OnWriteDone.
  void WriteDone(bool ok) EXCLUDES(mu_) {
    Action a;
    {
      MutexLock lock(mu_);
      writing_ = false;
      if (!ok) {
        closing_ = true;
        queue_.clear();
      }
      Next(a);
    }
    Run(a);
  }

  // Ends the call with `status` once everything queued is written.
  void Finish(grpc::Status status) EXCLUDES(mu_) {
    Action a;
    {
      MutexLock lock(mu_);
      if (closing_) return;
      closing_ = true;
      status_ = std::move(status);
      Next(a);
    }
    Run(a);
  }

  // Ends the call now with `status`, dropping what is queued and cancelling a write in
  // flight.
  void Abort(grpc::Status status) EXCLUDES(mu_) {
    Action a;
    {
      MutexLock lock(mu_);
      if (finished_) return;
      if (!closing_) status_ = std::move(status);
      closing_ = true;
      queue_.clear();
      a.cancel = true;
      Next(a);
    }
    Run(a);
  }

  bool closing() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return closing_;
  }

  // The reactor's OnDone: waits for operations in progress; nothing touches the reactor after.
  void Detach() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    alive_ = false;
    while (pins_ > 0) unpinned_.Wait(mu_);
  }

 private:
  struct Action {
    bool cancel = false;
    bool write = false;
    bool finish = false;
    bool pinned = false;
  };

  // Chooses what to start next; pins the reactor when something is to be started.
  void Next(Action& a) REQUIRES(mu_) {
    if (!alive_) {
      a = Action();
      return;
    }
    if (!finished_ && !writing_) {
      if (!queue_.empty()) {
        writing_ = true;
        inflight_ = std::move(queue_.front());
        queue_.pop_front();
        a.write = true;
      } else if (closing_) {
        finished_ = true;
        a.finish = true;
      }
    }
    if (a.cancel || a.write || a.finish) {
      a.pinned = true;
      ++pins_;
    }
  }

  void Run(const Action& a) EXCLUDES(mu_) {
    if (!a.pinned) return;
    if (a.cancel) context_->TryCancel();
    if (a.write) reactor_->StartWrite(&inflight_);
    if (a.finish) reactor_->Finish(status_);
    MutexLock lock(mu_);
    if (--pins_ == 0) unpinned_.SignalAll();
  }

  Reactor* const reactor_;
  grpc::CallbackServerContext* const context_;
  const size_t limit_;
  Mutex mu_;
  CondVar unpinned_;
  std::deque<Msg> queue_ GUARDED_BY(mu_);
  Msg inflight_;  // written by the thread that set writing_, read by gRPC during the write
  bool writing_ GUARDED_BY(mu_) = false;
  bool closing_ GUARDED_BY(mu_) = false;   // no more messages accepted
  bool finished_ GUARDED_BY(mu_) = false;  // Finish started
  bool alive_ GUARDED_BY(mu_) = true;      // OnDone not yet called
  int pins_ GUARDED_BY(mu_) = 0;
  grpc::Status status_;  // set before finished_, read once by the finishing thread
};

// Calls refused before they started (credentials, rights, limits).
template <typename Req, typename Resp>
class RefusedBidi final : public grpc::ServerBidiReactor<Req, Resp> {
 public:
  explicit RefusedBidi(const Status& why) { this->Finish(ToGrpc(why)); }
  void OnDone() override { delete this; }
};

template <typename Resp>
class RefusedWrite final : public grpc::ServerWriteReactor<Resp> {
 public:
  explicit RefusedWrite(const Status& why) { this->Finish(ToGrpc(why)); }
  void OnDone() override { delete this; }
};

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, const Status& why) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(why));
  return reactor;
}

// ---- WorkerService.Connect: one bidirectional stream per worker.

class WorkerReactor final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage> {
 public:
  // `cert_name`: the name in the worker's client certificate (empty with --insecure): the
  // only name this stream may register, and so report, under.
  WorkerReactor(Coordinator& coordinator, grpc::CallbackServerContext* context, size_t limit,
                std::string cert_name)
      : coordinator_(coordinator),
        stream_(std::make_shared<Stream>(this, context, limit)),
        cert_name_(std::move(cert_name)) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      if (!name_.empty()) coordinator_.OnStreamClosed(name_, stream_.get());
      stream_->out.Finish(grpc::Status::OK);
      return;
    }
    if (name_.empty()) {
      grpc::Status refused = CheckRegister(in_);
      if (refused.ok() && !cert_name_.empty() && in_.register_().name() != cert_name_) {
        refused = grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                               "register.name: the client certificate is for worker '" +
                                   cert_name_ + "', not '" + in_.register_().name() + "'");
      }
      if (!refused.ok()) {
        spdlog::warn("refused a worker stream from {}: {}", stream_->peer, refused.error_message());
        stream_->out.Finish(refused);
        return;
      }
      name_ = in_.register_().name();
      stream_->name = name_;
      coordinator_.OnRegister(in_.register_(), stream_);
    } else if (in_.has_register_()) {
      spdlog::warn("worker {}: register on an open stream; ignored", name_);
    } else {
      coordinator_.OnWorkerMessage(name_, in_);
    }
    if (!stream_->out.closing()) StartRead(&in_);
  }

  void OnWriteDone(bool ok) override { stream_->out.WriteDone(ok); }

  void OnCancel() override {
    stream_->out.Abort(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    if (!name_.empty()) coordinator_.OnStreamClosed(name_, stream_.get());
    stream_->out.Detach();
    delete this;
  }

 private:
  struct Stream final : WorkerStream {
    Stream(WorkerReactor* reactor, grpc::CallbackServerContext* context, size_t limit)
        : out(reactor, context, limit), peer(context->peer()) {}
    bool Enqueue(const v1::CoordinatorMessage& msg) override {
      auto pushed = out.Enqueue(msg);
      if (pushed == decltype(out)::Push::kOverflow) {
        spdlog::warn("worker {}: stream dropped: its queue of messages is full and not read", name);
      }
      return pushed == decltype(out)::Push::kQueued;
    }
    void Close(const std::string& why) override {
      out.Abort(grpc::Status(grpc::StatusCode::ABORTED, why));
    }
    Outbound<v1::CoordinatorMessage, WorkerReactor> out;
    const std::string peer;
    std::string name;  // set once, on the reactor's thread, before the stream is shared
  };

  static grpc::Status CheckRegister(const v1::WorkerMessage& first) {
    if (!first.has_register_()) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "the first message must be register"};
    }
    const v1::Register& reg = first.register_();
    if (!IsValidName(reg.name())) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "register.name: '" + reg.name() + "' is not a valid worker name"};
    }
    if (reg.slots() < 0 || reg.slots() > 4096) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "register.slots: out of range"};
    }
    if (reg.cores() < 0) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "register.cores: out of range"};
    }
    return grpc::Status::OK;
  }

  Coordinator& coordinator_;
  std::shared_ptr<Stream> stream_;
  const std::string cert_name_;
  v1::WorkerMessage in_;
  std::string name_;  // empty until Register; touched only by the read chain and OnDone
};

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

class LogsCall : public std::enable_shared_from_this<LogsCall> {
 public:
  static constexpr int kChunk = 256 * 1024;
  // How long the worker holds a follow request with nothing new to say.
  static constexpr int kFollowWaitMs = 10000;
  using Out = Outbound<v1::LogChunk, LogsReactor>;

  LogsCall(Coordinator& coordinator, LogsReactor* reactor, grpc::CallbackServerContext* context,
           const v1::GetLogsRequest& req)
      : coordinator_(coordinator),
        req_(req),
        out_(reactor, context, 4),
        offset_(req.tail_bytes() > 0 ? -req.tail_bytes() : 0),
        attempt_(req.has_attempt() ? req.attempt() : -1) {}

  Out& out() { return out_; }

  // Asks for the next chunk. wait: the last answer had nothing new.
  void Request(bool wait) EXCLUDES(mu_) {
    int attempt;
    int64_t offset;
    {
      MutexLock lock(mu_);
      attempt = attempt_;
      offset = offset_;
    }
    std::weak_ptr<LogsCall> weak = weak_from_this();
    auto asked = coordinator_.RequestLogs(req_.job_id(), req_.rank(), attempt, offset, kChunk,
                                          wait ? kFollowWaitMs : 0,
                                          [weak](const StatusOr<v1::LogData>& data) {
                                            if (auto self = weak.lock()) self->OnData(data);
                                          });
    if (!asked.ok()) {
      bool first;
      {
        MutexLock lock(mu_);
        first = first_;
      }
      out_.Finish(first ? ToGrpc(asked.status()) : grpc::Status::OK);
      return;
    }
    MutexLock lock(mu_);
    attempt_ = asked->attempt;
    job_finished_ = asked->job_finished;
  }

  // The reactor's OnWriteDone: the next chunk is asked for once the last one is written.
  void WriteDone(bool ok) EXCLUDES(mu_) {
    out_.WriteDone(ok);
    bool next = false;
    {
      MutexLock lock(mu_);
      next = ok && next_after_write_;
      next_after_write_ = false;
    }
    if (next) Request(false);
  }

 private:
  void OnData(const StatusOr<v1::LogData>& data) EXCLUDES(mu_) {
    if (!data.ok()) {
      out_.Finish(ToGrpc(data.status()));
      return;
    }
    if (!data->error().empty()) {
      // Logs removed by the worker's retention are no unknown job (exit 4 would say so).
      out_.Finish(grpc::Status(
          data->removed() ? grpc::StatusCode::FAILED_PRECONDITION : grpc::StatusCode::NOT_FOUND,
          data->error()));
      return;
    }
    const bool full = static_cast<int>(data->data().size()) >= kChunk;
    bool finished;
    int attempt;
    {
      MutexLock lock(mu_);
      first_ = false;
      offset_ = data->next_offset();
      finished = job_finished_;
      attempt = attempt_;
    }
    const bool end = !full && (!req_.follow() || data->eof() || (finished && data->data().empty()));
    if (!data->data().empty()) {
      v1::LogChunk chunk;
      chunk.set_rank(req_.rank());
      chunk.set_attempt(attempt);
      chunk.set_data(data->data());
      if (!end) {
        MutexLock lock(mu_);
        next_after_write_ = true;
      }
      if (out_.Enqueue(std::move(chunk)) != Out::Push::kQueued) return;
    }
    if (end) {
      out_.Finish(grpc::Status::OK);
    } else if (data->data().empty()) {
      Request(true);
    }
  }

  Coordinator& coordinator_;
  const v1::GetLogsRequest req_;
  Out out_;
  Mutex mu_;
  int64_t offset_ GUARDED_BY(mu_);
  int attempt_ GUARDED_BY(mu_);
  bool first_ GUARDED_BY(mu_) = true;
  bool job_finished_ GUARDED_BY(mu_) = false;
  bool next_after_write_ GUARDED_BY(mu_) = false;
};

class LogsReactor final : public grpc::ServerWriteReactor<v1::LogChunk> {
 public:
  LogsReactor(Coordinator& coordinator, Authorizer& auth, grpc::CallbackServerContext* context,
              const v1::GetLogsRequest& req, std::shared_ptr<void> slot,
              const std::string& token_id)
      : call_(std::make_shared<LogsCall>(coordinator, this, context, req)), slot_(std::move(slot)) {
    auth.OnRevoked(slot_, Closer(token_id));
    call_->Request(false);
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

// Every handler begins with auth_.Check naming its own method (coordinator/rpc/auth.h).

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* WorkerServiceImpl::Connect(
    grpc::CallbackServerContext* context) {
  auto who = auth_.Check(*context, "/convoy.v1.WorkerService/Connect");
  if (!who.ok()) return new RefusedBidi<v1::WorkerMessage, v1::CoordinatorMessage>(who.status());
  return new WorkerReactor(coordinator_, context, limits_.worker_queue,
                           who->kind == Principal::Kind::kWorker ? who->name : "");
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* req,
                                                    v1::SubmitJobResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/SubmitJob");
  if (!who.ok()) return FinishNow(context, who.status());
  Status ceiling = auth_.CheckPriority(*who, req->spec().priority());
  if (!ceiling.ok()) return FinishNow(context, ceiling);
  Status quota = auth_.TakeSubmit(*who);
  if (!quota.ok()) return FinishNow(context, quota);
  if (!req->spec().code_sha256().empty() &&
      (code_ == nullptr || !code_->Has(req->spec().code_sha256()))) {
    return FinishNow(context, Status::FailedPrecondition(
                                  "code_sha256: no code archive " + req->spec().code_sha256() +
                                  " is stored; upload it with UploadCode first"));
  }
  // Code its owner uploaded (admins: any). Knowing a hash is not having the code.
  if (!req->spec().code_sha256().empty() && !who->admin() &&
      !code_->OwnedBy(req->spec().code_sha256(), who->name)) {
    return FinishNow(
        context,
        Status::PermissionDenied("code_sha256: code archive " + req->spec().code_sha256() +
                                 " was not uploaded by " + who->Describe() +
                                 "; a job names only its owner's code (upload it: submit --code)"));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const bool user = who->kind == Principal::Kind::kUser;
  const std::string owner = user ? who->name : "";
  const std::string role = user ? RoleName(who->role) : "";
  coordinator_.Submit(req->spec(), owner, role, req->request_id(),
                      [reactor, resp](const StatusOr<std::string>& id) {
                        if (!id.ok()) {
                          reactor->Finish(ToGrpc(id.status()));
                          return;
                        }
                        resp->set_job_id(*id);
                        reactor->Finish(grpc::Status::OK);
                      });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* req, v1::Job* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/GetJob");
  if (!who.ok()) return FinishNow(context, who.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Only what is durable: a restart never takes back what this answer showed.
  coordinator_.GetCommitted(req->job_id(), [reactor, resp, who = *who](StatusOr<v1::Job> job) {
    if (job.ok()) {
      Authorizer::Redact(who, &*job);
      *resp = std::move(*job);
    }
    reactor->Finish(ToGrpc(job.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJobMetrics(grpc::CallbackServerContext* context,
                                                        const v1::GetJobMetricsRequest* req,
                                                        v1::JobMetrics* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/GetJobMetrics");
  if (!who.ok()) return FinishNow(context, who.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto metrics = coordinator_.GetMetrics(req->job_id());
  if (metrics.ok()) *resp = std::move(*metrics);
  reactor->Finish(ToGrpc(metrics.status()));
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* req,
                                                   v1::ListJobsResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/ListJobs");
  if (!who.ok()) return FinishNow(context, who.status());
  auto query = ParseJobQuery(*req);
  if (!query.ok()) return FinishNow(context, query.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  coordinator_.ListPageCommitted(*query, [reactor, resp, who = *who](JobManager::JobPage page) {
    for (v1::Job& job : page.jobs) {
      Authorizer::Redact(who, &job);
      *resp->add_jobs() = std::move(job);
    }
    resp->set_next_page_token(std::move(page.next_page_token));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* req,
                                                    v1::Job* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/CancelJob");
  if (!who.ok()) return FinishNow(context, who.status());
  if (!who->admin()) {
    auto job = coordinator_.Get(req->job_id());
    if (!job.ok()) return FinishNow(context, job.status());
    Status mine = Authorizer::CheckOwner(*who, *job, Right::kJobsCancel);
    if (!mine.ok()) return FinishNow(context, mine);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string by = who->kind == Principal::Kind::kUser ? who->name : "";
  coordinator_.Cancel(req->job_id(), req->reason(), by,
                      [reactor, resp](const StatusOr<v1::Job>& job) {
                        if (job.ok()) *resp = *job;
                        reactor->Finish(ToGrpc(job.status()));
                      });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::DeleteJob(grpc::CallbackServerContext* context,
                                                    const v1::DeleteJobRequest* req,
                                                    v1::DeleteJobResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/DeleteJob");
  if (!who.ok()) return FinishNow(context, who.status());
  if (!who->admin()) {
    auto job = coordinator_.Get(req->job_id());
    if (!job.ok()) return FinishNow(context, job.status());
    Status mine = Authorizer::CheckOwner(*who, *job, Right::kJobsDelete);
    if (!mine.ok()) return FinishNow(context, mine);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string by = who->kind == Principal::Kind::kUser ? who->name : "";
  coordinator_.Delete(
      req->job_id(), by,
      [reactor, resp, id = req->job_id()](const StatusOr<std::vector<std::string>>& workers) {
        if (workers.ok()) {
          resp->set_job_id(id);
          for (const std::string& w : *workers) resp->add_workers(w);
        }
        reactor->Finish(ToGrpc(workers.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                      const v1::ListWorkersRequest* req,
                                                      v1::ListWorkersResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/ListWorkers");
  if (!who.ok()) return FinishNow(context, who.status());
  auto query = ParseWorkerQuery(*req);
  if (!query.ok()) return FinishNow(context, query.status());
  JobManager::WorkerPage page = coordinator_.ListWorkersPage(*query);
  for (v1::WorkerInfo& w : page.workers) *resp->add_workers() = std::move(w);
  resp->set_next_page_token(std::move(page.next_page_token));
  return FinishNow(context, Status::Ok());
}

grpc::ServerUnaryReactor* JobServiceImpl::DrainWorker(grpc::CallbackServerContext* context,
                                                      const v1::DrainWorkerRequest* req,
                                                      v1::WorkerInfo* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/DrainWorker");
  if (!who.ok()) return FinishNow(context, who.status());
  if (req->now() && !req->drain()) {
    return FinishNow(context, Status::InvalidArgument("now: only a drain can be --now"));
  }
  // Taken once the request is known to go ahead: a call's default reactor is taken once
  // (gRPC asserts on a second DefaultReactor() in builds with assertions, TSAN's included).
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string by = who->kind == Principal::Kind::kUser ? who->name : "";
  coordinator_.SetDrained(req->name(), req->drain(), by, req->now(),
                          [reactor, resp](const StatusOr<v1::WorkerInfo>& info) {
                            if (info.ok()) *resp = *info;
                            reactor->Finish(ToGrpc(info.status()));
                          });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::ForgetWorker(grpc::CallbackServerContext* context,
                                                       const v1::ForgetWorkerRequest* req,
                                                       v1::ForgetWorkerResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/ForgetWorker");
  if (!who.ok()) return FinishNow(context, who.status());
  if (req->name().empty()) {
    return FinishNow(context, Status::InvalidArgument("name: the worker to forget is required"));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string by = who->kind == Principal::Kind::kUser ? who->name : "";
  TokenStore* tokens = tokens_;
  const std::string name = req->name();
  coordinator_.ForgetWorker(
      name, by,
      [reactor, resp, tokens, name](const StatusOr<JobManager::ForgottenWorker>& forgotten) {
        Status st = forgotten.status();
        if (forgotten.ok()) {
          *resp->mutable_worker() = forgotten->worker;
          for (const std::string& id : forgotten->abandoned_file_deletions) {
            resp->add_abandoned_file_deletions(id);
          }
        }
        // The name's certificate record goes too, so that a join token may take the name again:
        // also for a worker that joined but never registered (NOT_FOUND above).
        if (tokens != nullptr && (st.ok() || st.code() == StatusCode::kNotFound)) {
          auto had = tokens->ForgetCertificate(name);
          if (!had.ok()) {
            st = had.status();
          } else if (*had && !st.ok()) {
            st = Status::Ok();
          }
        }
        reactor->Finish(ToGrpc(st));
      });
  return reactor;
}

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

// ---- JoinService

grpc::ServerUnaryReactor* JoinServiceImpl::GetClusterInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetClusterInfoRequest*,
                                                          v1::ClusterInfo* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JoinService/GetClusterInfo");
  if (!who.ok()) return FinishNow(context, who.status());
  if (ca_ == nullptr) {
    return FinishNow(context, Status::FailedPrecondition(
                                  "this coordinator runs --insecure: it has no cluster CA"));
  }
  resp->set_ca_pem(ca_->ca.cert_pem);
  resp->set_ca_fingerprint(ca_->fingerprint);
  resp->set_cluster_id(ca_->cluster_id);
  return FinishNow(context, Status::Ok());
}

Status JoinServiceImpl::Issue(const std::string& name, const std::string& csr_pem,
                              v1::JoinResponse* resp) {
  if (ca_ == nullptr) {
    return Status::FailedPrecondition(
        "this coordinator runs --insecure: it issues no certificates");
  }
  if (ca_->ca.key_pem.empty()) {
    return Status::FailedPrecondition(
        "this coordinator uses the operator's own PKI (--tls-ca): give the worker --tls-cert, "
        "--tls-key and --tls-ca instead of a join token");
  }
  const int64_t now = clock_.NowUnixMs() / 1000;
  CertTemplate t;
  t.common_name = name;
  t.client = true;
  t.not_before_s = now - 300;  // clock skew between hosts
  t.not_after_s = now + ca_->worker_cert_ttl_s;
  auto cert = SignCertificateRequest(ca_->ca, csr_pem, t);
  if (!cert.ok()) return Status::InvalidArgument("csr_pem: " + cert.status().message());
  resp->set_cert_pem(*cert);
  resp->set_ca_pem(ca_->ca.cert_pem);
  resp->set_not_after_unix_s(t.not_after_s);
  return Status::Ok();
}

grpc::ServerUnaryReactor* JoinServiceImpl::Join(grpc::CallbackServerContext* context,
                                                const v1::JoinRequest* req,
                                                v1::JoinResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JoinService/Join");
  if (!who.ok()) return FinishNow(context, who.status());
  if (!IsValidName(req->name())) {
    return FinishNow(context,
                     Status::InvalidArgument("name: '" + req->name() +
                                             "' is not valid: use 1-63 of [A-Za-z0-9._-]"));
  }
  if (tokens_ == nullptr) return FinishNow(context, Issue(req->name(), req->csr_pem(), resp));
  bool malformed = false;
  const std::string token = Authorizer::BearerToken(*context, &malformed);
  MutexLock lock(join_mu_);
  auto record = tokens_->Check(token, clock_.NowUnixMs(), false);
  if (!record.ok()) return FinishNow(context, record.status());
  if (!record->name.empty() && record->name != req->name()) {
    return FinishNow(
        context, Status::PermissionDenied("name: join token " + record->id + " joins only as '" +
                                          record->name + "', not '" + req->name() + "'"));
  }
  if (record->name.empty()) {
    // An unbound token takes only a free name: a leaked one cannot replace a live worker.
    auto holder = Holder(req->name());
    if (!holder.ok()) return FinishNow(context, holder.status());
    if (!holder->empty()) {
      return FinishNow(
          context, Status::AlreadyExists(
                       "name: '" + req->name() + "' is held by " + *holder +
                       "; join it with a token bound to it (convoy-coordinator token create --role "
                       "worker --name " +
                       req->name() + "), or have an admin run `convoy worker forget " +
                       req->name() + "` once that worker is gone"));
    }
  }
  // The use is taken only now that the request is known to be well formed and allowed.
  auto used = tokens_->Check(token, clock_.NowUnixMs(), true);
  if (!used.ok()) return FinishNow(context, used.status());
  Status issued = Issue(req->name(), req->csr_pem(), resp);
  if (issued.ok()) {
    issued = tokens_->RecordCertificate(req->name(), resp->not_after_unix_s());
  }
  if (issued.ok()) {
    spdlog::info("worker {} joined from {} with join token {}{}", req->name(), context->peer(),
                 who->token_id, record->name.empty() ? "" : " (bound to the name)");
  }
  return FinishNow(context, issued);
}

StatusOr<std::string> JoinServiceImpl::Holder(const std::string& name) {
  if (connected_ && connected_(name)) return std::string("a connected worker");
  auto not_after = tokens_->CertificateNotAfter(name);
  if (!not_after.ok()) return not_after.status();
  if (*not_after > clock_.NowUnixMs() / 1000) {
    return "a worker certificate valid until " + UtcIso8601(*not_after);
  }
  return std::string();
}

grpc::ServerUnaryReactor* JoinServiceImpl::Renew(grpc::CallbackServerContext* context,
                                                 const v1::RenewRequest* req,
                                                 v1::JoinResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JoinService/Renew");
  if (!who.ok()) return FinishNow(context, who.status());
  if (who->kind != Principal::Kind::kWorker) {
    return FinishNow(context, Status::FailedPrecondition(
                                  "renewal needs the worker's current client certificate"));
  }
  Status issued = Issue(who->name, req->csr_pem(), resp);
  if (issued.ok() && tokens_ != nullptr) {
    issued = tokens_->RecordCertificate(who->name, resp->not_after_unix_s());
  }
  if (issued.ok()) spdlog::info("worker {} renewed its certificate", who->name);
  return FinishNow(context, issued);
}

// ---- Code archives (common/code_archive.h)

grpc::ServerUnaryReactor* JobServiceImpl::UploadCode(grpc::CallbackServerContext* context,
                                                     const v1::UploadCodeRequest* req,
                                                     v1::UploadCodeResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/UploadCode");
  if (!who.ok()) return FinishNow(context, who.status());
  if (code_ == nullptr) {
    return FinishNow(context, Status::FailedPrecondition("this coordinator keeps no code"));
  }
  if (static_cast<int64_t>(req->data().size()) > kCodeChunkBytes) {
    return FinishNow(context, Status::InvalidArgument("data: a chunk is at most 4 MiB"));
  }
  // A new archive's first chunk: within the archives its uploader may keep.
  if (req->offset() == 0 && auth_.ArchiveLimitFor(*who) > 0 &&
      !code_->OwnedBy(req->sha256(), who->name)) {
    Status kept = auth_.CheckArchivesKept(*who, code_->CountOwnedBy(who->name));
    if (!kept.ok()) return FinishNow(context, kept);
  }
  Status quota = auth_.TakeUpload(*who, static_cast<int64_t>(req->data().size()));
  if (!quota.ok()) return FinishNow(context, quota);
  // File I/O on a callback thread: bounded by the chunk size; never under the state lock.
  auto progress =
      code_->Append(req->sha256(), req->total_size(), req->offset(), req->data(), who->name);
  if (progress.ok()) {
    resp->set_received(progress->received);
    resp->set_complete(progress->complete);
    if (progress->complete &&
        req->offset() + static_cast<int64_t>(req->data().size()) == req->total_size()) {
      spdlog::info("code archive {} ({} bytes) stored for {}", req->sha256(), req->total_size(),
                   who->Describe());
    }
  }
  return FinishNow(context, progress.status());
}

// ---- The web UI's login link (coordinator/web/ui_sessions.h)

grpc::ServerUnaryReactor* JobServiceImpl::CreateUiLogin(grpc::CallbackServerContext* context,
                                                        const v1::CreateUiLoginRequest*,
                                                        v1::CreateUiLoginResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/CreateUiLogin");
  if (!who.ok()) return FinishNow(context, who.status());
  if (!ui_login_) {
    return FinishNow(context, Status::FailedPrecondition(
                                  "this coordinator serves no web UI: start it with --ui-listen "
                                  "HOST:PORT"));
  }
  auto link = ui_login_(*who);
  if (link.ok()) *resp = std::move(*link);
  return FinishNow(context, link.status());
}

grpc::ServerUnaryReactor* WorkerServiceImpl::FetchCode(grpc::CallbackServerContext* context,
                                                       const v1::FetchCodeRequest* req,
                                                       v1::CodeChunk* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.WorkerService/FetchCode");
  if (!who.ok()) return FinishNow(context, who.status());
  if (code_ == nullptr) {
    return FinishNow(context, Status::FailedPrecondition("this coordinator keeps no code"));
  }
  int64_t total = 0;
  auto data = code_->Read(req->sha256(), req->offset(), kCodeChunkBytes, &total);
  if (data.ok()) {
    resp->set_data(std::move(*data));
    resp->set_total_size(total);
  }
  return FinishNow(context, data.status());
}

}  // namespace convoy

#include "coordinator/rpc/worker_service.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <utility>

#include "common/code_archive.h"
#include "common/util.h"

namespace convoy {
namespace {

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

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* WorkerServiceImpl::Connect(
    grpc::CallbackServerContext* context) {
  auto who = auth_.Check(*context, "/convoy.v1.WorkerService/Connect");
  if (!who.ok()) return new RefusedBidi<v1::WorkerMessage, v1::CoordinatorMessage>(who.status());
  return new WorkerReactor(coordinator_, context, limits_.worker_queue,
                           who->kind == Principal::Kind::kWorker ? who->name : "");
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

#include "worker/connection.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <random>
#include <thread>

namespace convoy {

CoordinatorConnection::CoordinatorConnection(const std::string& target) : target_(target) {
  grpc::ChannelArguments args;
  // Detect a dead coordinator (or a cut link) within seconds, not at the next write.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetMaxReceiveMessageSize(16 * 1024 * 1024);
  channel_ = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::WorkerService::NewStub(channel_);
}

bool CoordinatorConnection::Send(const v1::WorkerMessage& msg) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_ == nullptr || !registered_) return false;
  return stream_->Write(msg);
}

void CoordinatorConnection::Shutdown() {
  stopping_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  if (context_ != nullptr) context_->TryCancel();
}

void CoordinatorConnection::Run() {
  std::mt19937 rng(std::random_device{}());
  int backoff_ms = 100;
  while (!stopping_) {
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
    if (channel_->WaitForConnected(deadline)) {
      const auto began = std::chrono::steady_clock::now();
      Serve();
      if (std::chrono::steady_clock::now() - began > std::chrono::seconds(5)) backoff_ms = 100;
    }
    if (stopping_) break;
    const int sleep_ms = backoff_ms / 2 + static_cast<int>(rng() % (backoff_ms / 2 + 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    backoff_ms = std::min(backoff_ms * 2, 5000);
  }
}

void CoordinatorConnection::Serve() {
  grpc::ClientContext context;
  auto stream = stub_->Connect(&context);
  // Built before taking mu_: the supervisor thread holds its lock while it sends (lock order
  // supervisor -> connection), so this thread must not nest them the other way round.
  v1::WorkerMessage reg;
  *reg.mutable_register_() = supervisor_->BuildRegister();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    context_ = &context;
    stream_ = stream.get();
    registered_ = false;
    if (!stream->Write(reg)) {
      context_ = nullptr;
      stream_ = nullptr;
      return;
    }
  }
  v1::CoordinatorMessage msg;
  bool ok = stream->Read(&msg) && msg.has_register_ack();
  if (ok) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      registered_ = true;
    }
    spdlog::info("registered with the coordinator at {}", target_);
    supervisor_->OnConnected(msg.register_ack().heartbeat_interval_ms());
    while (stream->Read(&msg)) supervisor_->Post(msg);
  }
  supervisor_->OnDisconnected();
  {
    std::lock_guard<std::mutex> lock(mu_);
    context_ = nullptr;
    stream_ = nullptr;
    registered_ = false;
  }
  context.TryCancel();
  grpc::Status st = stream->Finish();
  if (!stopping_) {
    spdlog::warn("lost the coordinator at {}: {}; reconnecting", target_,
                 st.ok() ? "stream closed" : st.error_message());
  }
}

}  // namespace convoy

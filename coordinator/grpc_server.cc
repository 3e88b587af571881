#include "coordinator/grpc_server.h"

#include <chrono>

namespace convoy {

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(Coordinator& coordinator,
                                                        const std::string& listen,
                                                        StreamLimits limits) {
  auto listener = Listener::Bind(listen);
  if (!listener.ok()) return listener.status();
  std::unique_ptr<GrpcServer> s(new GrpcServer());
  s->listener_ = std::move(*listener);
  s->worker_service_ = std::make_unique<WorkerServiceImpl>(coordinator, limits);
  s->job_service_ = std::make_unique<JobServiceImpl>(coordinator, limits);

  grpc::ServerBuilder builder;
  builder.RegisterService(s->worker_service_.get());
  builder.RegisterService(s->job_service_.get());
  auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
      grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(16 * 1024 * 1024);
  builder.SetMaxSendMessageSize(64 * 1024 * 1024);
  // Pings from the server find dead peers whose TCP connection never said so; a worker's
  // heartbeats (every second) are the usual sign of life.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  s->server_ = builder.BuildAndStart();
  if (!s->server_) return Status::Unavailable("--listen " + listen + ": cannot start the server");
  s->listener_->Start(std::move(acceptor));
  return s;
}

GrpcServer::~GrpcServer() { Shutdown(0); }

void GrpcServer::Shutdown(int grace_ms) {
  if (shut_down_) return;
  shut_down_ = true;
  listener_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
}

}  // namespace convoy

#include "coordinator/rpc/grpc_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>

#include "common/util.h"

namespace convoy {

ServerSecurity InsecureForTests() {
  ServerSecurity s;
  s.insecure = true;
  return s;
}

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(Coordinator& coordinator,
                                                        const std::string& listen,
                                                        ServerSecurity security,
                                                        StreamLimits limits,
                                                        RpcObserver* rpc_observer) {
  auto hp = ParseHostPort(listen, "--listen");
  if (!hp.ok()) return hp.status();
  if (security.insecure && !IsLoopbackHost(hp->first)) {
    return Status::InvalidArgument(
        "--insecure serves plain text without authentication: it "
        "listens only on a loopback address, not '" +
        hp->first + "'");
  }
  if (!security.insecure && security.tokens == nullptr) {
    return Status::InvalidArgument("TLS needs the token store");
  }
  auto listener = Listener::Bind(listen);
  if (!listener.ok()) return listener.status();
  std::unique_ptr<GrpcServer> s(new GrpcServer());
  s->security_ = std::move(security);
  ServerSecurity& sec = s->security_;
  sec.auth.insecure = sec.insecure;
  sec.auth.tokens = sec.tokens;
  sec.auth.clock = &s->clock_;
  s->auth_ = std::make_unique<Authorizer>(sec.auth);
  s->listener_ = std::move(*listener);
  s->worker_service_ = std::make_unique<WorkerServiceImpl>(coordinator, *s->auth_, limits);
  s->job_service_ = std::make_unique<JobServiceImpl>(coordinator, *s->auth_, limits);
  s->join_service_ = std::make_unique<JoinServiceImpl>(
      *s->auth_, sec.insecure ? nullptr : &sec.ca, sec.tokens, s->clock_,
      [&coordinator](const std::string& name) { return coordinator.streams().Connected(name); });
  s->job_service_->SetTokenStore(sec.insecure ? nullptr : sec.tokens);
  s->worker_service_->SetCodeStore(sec.code);
  s->job_service_->SetCodeStore(sec.code);
  s->job_service_->SetUiLogin(sec.ui_login);

  std::shared_ptr<grpc::ServerCredentials> creds;
  if (sec.insecure) {
    creds = grpc::InsecureServerCredentials();
  } else {
    // Client certificates are asked for and, when given, verified against the cluster CA
    // (workers); people and joining workers come without one and show a token instead.
    grpc::SslServerCredentialsOptions opts(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
    opts.pem_root_certs = sec.ca.ca.cert_pem;
    opts.pem_key_cert_pairs.push_back({sec.server_key_pem, sec.server_cert_pem});
    creds = grpc::SslServerCredentials(opts);
  }

  // grpc.health.v1.Health (Check, Watch) for load balancers, Kubernetes' grpc probes and
  // operators: NOT_SERVING until the port accepts (the store was loaded before Start), then
  // SERVING, NOT_SERVING again from Shutdown. Deliberately unauthenticated (auth.cc lists it
  // as public): it says nothing but up or down.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.RegisterService(s->worker_service_.get());
  builder.RegisterService(s->job_service_.get());
  builder.RegisterService(s->join_service_.get());
  if (rpc_observer != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> factories;
    factories.push_back(MakeRpcMetricsInterceptor(rpc_observer));
    builder.experimental().SetInterceptorCreators(std::move(factories));
  }
  auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, creds);
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
  grpc::HealthCheckServiceInterface* health = s->server_->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(false);
  s->listener_->Start(std::move(acceptor));
  if (health != nullptr) health->SetServingStatus(true);
  if (!sec.insecure) {
    GrpcServer* self = s.get();
    s->revocation_ = std::thread([self] {
      std::unique_lock<std::mutex> lock(self->revocation_mu_);
      while (!self->revocation_stop_) {
        self->revocation_cv_.wait_for(lock,
                                      std::chrono::milliseconds(Authorizer::kRevocationCheckMs));
        if (self->revocation_stop_) break;
        lock.unlock();
        self->auth_->CloseRevokedStreams();
        lock.lock();
      }
    });
  }
  return s;
}

GrpcServer::~GrpcServer() { Shutdown(0); }

void GrpcServer::Shutdown(int grace_ms) {
  if (shut_down_) return;
  shut_down_ = true;
  if (revocation_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(revocation_mu_);
      revocation_stop_ = true;
    }
    revocation_cv_.notify_all();
    revocation_.join();
  }
  if (auto* health = server_->GetHealthCheckService(); health != nullptr) {
    health->SetServingStatus(false);
  }
  listener_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
}

}  // namespace convoy

#include "coordinator/rpc/health_server.h"

#include <grpcpp/health_check_service_interface.h>

#include <chrono>

#include "common/util.h"

namespace convoy {

StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& listen) {
  auto hp = ParseHostPort(listen, "--health-listen");
  if (!hp.ok()) return hp.status();
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<HealthServer> s(new HealthServer());
  grpc::ServerBuilder builder;  // no services of ours: only the default health service
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials());
  // Answers every other method UNIMPLEMENTED; gives the server the callback queue it needs.
  s->generic_ = std::make_unique<grpc::CallbackGenericService>();
  builder.RegisterCallbackGenericService(s->generic_.get());
  s->server_ = builder.BuildAndStart();
  if (!s->server_) {
    return Status::Unavailable("--health-listen " + listen + ": cannot listen there");
  }
  if (auto* health = s->server_->GetHealthCheckService(); health != nullptr) {
    health->SetServingStatus("", true);
    health->SetServingStatus(kLeaderService, false);
  }
  return s;
}

HealthServer::~HealthServer() { Shutdown(); }

void HealthServer::SetLeading(bool leading) {
  if (auto* health = server_->GetHealthCheckService(); health != nullptr) {
    health->SetServingStatus(kLeaderService, leading);
  }
}

void HealthServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (auto* health = server_->GetHealthCheckService(); health != nullptr) {
    health->SetServingStatus(false);
  }
  server_->Shutdown(std::chrono::system_clock::now());
}

}  // namespace convoy

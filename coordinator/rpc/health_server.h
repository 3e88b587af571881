// grpc.health.v1 alone, in plain text, on --health-listen: for probes that cannot speak TLS
// (Kubernetes' grpc probes). It answers two services:
//   ""        SERVING while the process is up and not shutting down (liveness)
//   "leader"  SERVING only while this coordinator leads and serves its port (readiness): a
//             follower of an etcd group waits with NOT_SERVING, so that a Service routes to
//             the leader alone. A coordinator on SQLite is its cluster's leader once serving.
// Nothing else is served there: every other method is UNIMPLEMENTED.
//
// Threading: Start, then the setters from any thread (gRPC's health service locks).
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace convoy {

class HealthServer {
 public:
  static constexpr const char* kLeaderService = "leader";

  // Serves on `listen` (HOST:PORT): "" SERVING, "leader" NOT_SERVING.
  static StatusOr<std::unique_ptr<HealthServer>> Start(const std::string& listen);
  ~HealthServer();

  void SetLeading(bool leading);
  // Both NOT_SERVING, then stops.
  void Shutdown();

 private:
  HealthServer() = default;
  std::unique_ptr<grpc::CallbackGenericService> generic_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace convoy

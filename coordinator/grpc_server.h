// The coordinator's gRPC server: the services on the Coordinator, the channel settings, and
// the coordinator's own accept loop (coordinator/listener.h). main.cc and the in-process test
// cluster start it the same way.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "coordinator/coordinator.h"
#include "coordinator/grpc_service.h"
#include "coordinator/listener.h"

namespace convoy {

class GrpcServer {
 public:
  // Serves `coordinator` on `listen` (HOST:PORT; port 0 picks a free one).
  static StatusOr<std::unique_ptr<GrpcServer>> Start(Coordinator& coordinator,
                                                     const std::string& listen,
                                                     StreamLimits limits = {});
  ~GrpcServer();

  int port() const { return listener_->port(); }
  uint64_t shed_connections() const { return listener_->shed(); }
  // Stops accepting, then shuts the server down (calls in flight get `grace_ms`).
  void Shutdown(int grace_ms = 2000);

 private:
  GrpcServer() = default;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace convoy

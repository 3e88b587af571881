// The coordinator's gRPC server: the services on the Coordinator, the channel settings, and
// the coordinator's own accept loop (coordinator/rpc/listener.h). main.cc and the in-process test
// cluster start it the same way.
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/rpc/grpc_service.h"
#include "coordinator/rpc/listener.h"
#include "coordinator/rpc/rpc_metrics_interceptor.h"

namespace convoy {

// How the server proves itself and checks its callers.
struct ServerSecurity {
  // Plain text, every caller the local admin: refused on anything but a loopback address.
  bool insecure = false;
  // TLS: the server's certificate chain and key (PEM), and the cluster CA that client
  // certificates must be signed by.
  std::string server_cert_pem;
  std::string server_key_pem;
  ClusterCa ca;
  TokenStore* tokens = nullptr;
  AuthOptions auth;  // insecure, tokens and clock are filled in by Start
  // Where uploaded code archives are kept (not owned; null: no `submit --code`).
  CodeStore* code = nullptr;
  // The web UI's login links (JobService.CreateUiLogin); empty: no web UI.
  UiLoginFn ui_login;
};

// Plain text for tests and the local demo (no TLS, no tokens).
ServerSecurity InsecureForTests();

class GrpcServer {
 public:
  // Serves `coordinator` on `listen` (HOST:PORT; port 0 picks a free one). With
  // `rpc_observer`, every call is counted and timed by an interceptor
  // (rpc_metrics_interceptor.h); it must outlive the server.
  static StatusOr<std::unique_ptr<GrpcServer>> Start(Coordinator& coordinator,
                                                     const std::string& listen,
                                                     ServerSecurity security,
                                                     StreamLimits limits = {},
                                                     RpcObserver* rpc_observer = nullptr);
  ~GrpcServer();

  int port() const { return listener_->port(); }
  // Who may do what, and the per-token stream limits: shared with the web UI (coordinator/web),
  // so that its pages count against the same bounds as `convoy watch`.
  Authorizer& auth() { return *auth_; }
  uint64_t shed_connections() const { return listener_->shed(); }
  // Stops accepting, then shuts the server down (calls in flight get `grace_ms`).
  void Shutdown(int grace_ms = 2000);

 private:
  GrpcServer() = default;
  ServerSecurity security_;
  SystemClock clock_;
  std::unique_ptr<Authorizer> auth_;
  std::unique_ptr<JoinServiceImpl> join_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
  // With tokens: every Authorizer::kRevocationCheckMs, the open streams of revoked tokens
  // are closed (Authorizer::CloseRevokedStreams).
  std::thread revocation_;
  std::mutex revocation_mu_;
  std::condition_variable revocation_cv_;
  bool revocation_stop_ = false;
};

}  // namespace convoy

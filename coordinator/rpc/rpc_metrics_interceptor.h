// Counts and times every RPC the coordinator serves in one place: a gRPC server interceptor
// (grpc::experimental::ServerInterceptorFactoryInterface) registered by GrpcServer, so no
// handler carries metrics code. It sees the callback-API services like any other: the
// interceptor is created when a call starts and destroyed when it is done, and it notes the
// status code the call sends (PRE_SEND_STATUS). A call that ends without sending a status
// (the client went away) counts as CANCELLED. For streams the time is the stream's life.
//
// Threading: the observer is called from gRPC's threads, concurrently; it must be
// thread-safe and must not block.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>

namespace convoy {

class RpcObserver {
 public:
  virtual ~RpcObserver() = default;
  // One call ended. `full_method` is gRPC's "/package.Service/Method" (as the client sent
  // it: the observer must bound what it labels by).
  virtual void OnRpcDone(const std::string& full_method, grpc::StatusCode code, double seconds) = 0;
};

// Makes the interceptor of each call; `observer` must outlive the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRpcMetricsInterceptor(
    RpcObserver* observer);

}  // namespace convoy

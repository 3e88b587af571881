#include "coordinator/rpc/rpc_metrics_interceptor.h"

#include <chrono>

namespace convoy {
namespace {

class RpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(grpc::experimental::ServerRpcInfo* info, RpcObserver* observer)
      : observer_(observer),
        method_(info->method() != nullptr ? info->method() : ""),
        began_(std::chrono::steady_clock::now()) {}

  ~RpcMetricsInterceptor() override {
    // Real elapsed time for a latency histogram; no decision depends on it.
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
    observer_->OnRpcDone(method_, code_, seconds);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      code_ = methods->GetSendStatus().error_code();
    }
    methods->Proceed();
  }

 private:
  RpcObserver* const observer_;
  const std::string method_;
  const std::chrono::steady_clock::time_point began_;
  grpc::StatusCode code_ = grpc::StatusCode::CANCELLED;  // until a status is sent
};

class Factory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(RpcObserver* observer) : observer_(observer) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcMetricsInterceptor(info, observer_);
  }

 private:
  RpcObserver* const observer_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRpcMetricsInterceptor(
    RpcObserver* observer) {
  return std::make_unique<Factory>(observer);
}

}  // namespace convoy

// WorkerService (proto/convoy/v1/worker.proto) on gRPC's callback API: each worker's one
// long-lived stream (Connect), whose messages go to the Coordinator and whose outgoing side
// is a bounded queue (outbound.h), and the code archives workers fetch (FetchCode).
#pragma once

#include <grpcpp/grpcpp.h>

#include "convoy/v1/worker.grpc.pb.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/rpc/outbound.h"
#include "coordinator/store/code_store.h"

namespace convoy {

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  WorkerServiceImpl(Coordinator& coordinator, Authorizer& auth, StreamLimits limits = {})
      : coordinator_(coordinator), auth_(auth), limits_(limits) {}

  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* FetchCode(grpc::CallbackServerContext* context,
                                      const v1::FetchCodeRequest* req,
                                      v1::CodeChunk* resp) override;

  // Where code archives are kept (not owned; null: FetchCode answers FAILED_PRECONDITION).
  // Before the server starts.
  void SetCodeStore(CodeStore* code) { code_ = code; }

 private:
  Coordinator& coordinator_;
  Authorizer& auth_;
  const StreamLimits limits_;
  CodeStore* code_ = nullptr;
};

}  // namespace convoy

// The gRPC services of convoy-coordinator on gRPC's callback API: no thread per call or
// stream, no polling. They translate messages and statuses and call the Coordinator and the
// policies of coordinator/control/, which make every decision
// (coordinator/control/coordinator.h). One service each: JobService here (its unary calls in
// grpc_service.cc, WatchJob and GetLogs in job_service_streams.cc), WorkerService in
// worker_service.h, JoinService in join_service.h; what they share in outbound.h.
//
// Threading: reactions run on gRPC's callback threads; the Coordinator's replies, watch
// updates and log data arrive on its commit thread. Each streaming call keeps a bounded
// queue of outgoing messages behind its own mutex, and at most one write in flight; a
// client that does not read is dropped (RESOURCE_EXHAUSTED, with a log line) when its queue
// is full, so it can never stall the coordinator. No reactor operation (StartWrite, Finish)
// is ever started with a lock held.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "convoy/v1/job.grpc.pb.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/control/worker_forgetter.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/rpc/join_service.h"
#include "coordinator/rpc/outbound.h"
#include "coordinator/rpc/worker_service.h"
#include "coordinator/store/code_store.h"

namespace convoy {

// Makes a web UI login link for `who` (JobService.CreateUiLogin); called on a gRPC thread.
using UiLoginFn = std::function<StatusOr<v1::CreateUiLoginResponse>(const Principal& who)>;

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  JobServiceImpl(Coordinator& coordinator, Authorizer& auth, StreamLimits limits = {})
      : coordinator_(coordinator),
        auth_(auth),
        limits_(limits),
        forgetter_(std::make_unique<WorkerForgetter>(coordinator, nullptr)) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* req,
                                      v1::SubmitJobResponse* resp) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* req, v1::Job* resp) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* req,
                                     v1::ListJobsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* req, v1::Job* resp) override;
  grpc::ServerUnaryReactor* DeleteJob(grpc::CallbackServerContext* context,
                                      const v1::DeleteJobRequest* req,
                                      v1::DeleteJobResponse* resp) override;
  grpc::ServerWriteReactor<v1::WatchJobResponse>* WatchJob(grpc::CallbackServerContext* context,
                                                           const v1::WatchJobRequest* req) override;
  grpc::ServerWriteReactor<v1::LogChunk>* GetLogs(grpc::CallbackServerContext* context,
                                                  const v1::GetLogsRequest* req) override;
  grpc::ServerUnaryReactor* GetJobMetrics(grpc::CallbackServerContext* context,
                                          const v1::GetJobMetricsRequest* req,
                                          v1::JobMetrics* resp) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* req,
                                        v1::ListWorkersResponse* resp) override;
  grpc::ServerUnaryReactor* DrainWorker(grpc::CallbackServerContext* context,
                                        const v1::DrainWorkerRequest* req,
                                        v1::WorkerInfo* resp) override;
  grpc::ServerUnaryReactor* CordonWorker(grpc::CallbackServerContext* context,
                                         const v1::CordonWorkerRequest* req,
                                         v1::WorkerInfo* resp) override;
  grpc::ServerUnaryReactor* ForgetWorker(grpc::CallbackServerContext* context,
                                         const v1::ForgetWorkerRequest* req,
                                         v1::ForgetWorkerResponse* resp) override;
  grpc::ServerUnaryReactor* UploadCode(grpc::CallbackServerContext* context,
                                       const v1::UploadCodeRequest* req,
                                       v1::UploadCodeResponse* resp) override;
  grpc::ServerUnaryReactor* CreateUiLogin(grpc::CallbackServerContext* context,
                                          const v1::CreateUiLoginRequest* req,
                                          v1::CreateUiLoginResponse* resp) override;

  // Where code archives are kept (not owned; null: UploadCode answers FAILED_PRECONDITION
  // and a spec naming code_sha256 is refused). Before the server starts.
  void SetCodeStore(CodeStore* code) { code_ = code; }
  // ForgetWorker also drops the name's certificate record (so that a join token may take the
  // name again). Before the server starts; null: --insecure.
  void SetTokenStore(TokenStore* tokens) {
    forgetter_ = std::make_unique<WorkerForgetter>(coordinator_, tokens);
  }
  // CreateUiLogin's answer for an authorised caller (the web UI's one-time login link,
  // coordinator/web). Before the server starts; empty: FAILED_PRECONDITION, no web UI.
  void SetUiLogin(UiLoginFn ui_login) { ui_login_ = std::move(ui_login); }

 private:
  Coordinator& coordinator_;
  Authorizer& auth_;
  const StreamLimits limits_;
  CodeStore* code_ = nullptr;
  std::unique_ptr<WorkerForgetter> forgetter_;
  UiLoginFn ui_login_;
};

}  // namespace convoy

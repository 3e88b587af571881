// The gRPC services of convoy-coordinator on gRPC's callback API: no thread per call or
// stream, no polling. They translate messages and statuses and call the Coordinator, which
// makes every decision (coordinator/control/coordinator.h).
//
// Threading: reactions run on gRPC's callback threads; the Coordinator's replies, watch
// updates and log data arrive on its commit thread. Each streaming call keeps a bounded
// queue of outgoing messages behind its own mutex, and at most one write in flight; a
// client that does not read is dropped (RESOURCE_EXHAUSTED, with a log line) when its queue
// is full, so it can never stall the coordinator. No reactor operation (StartWrite, Finish)
// is ever started with a lock held.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <functional>

#include "common/pki.h"
#include "convoy/v1/auth.grpc.pb.h"
#include "convoy/v1/job.grpc.pb.h"
#include "convoy/v1/worker.grpc.pb.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/store/code_store.h"

namespace convoy {

// grpc::Status for a convoy::Status.
grpc::Status ToGrpc(const Status& status);

// Makes a web UI login link for `who` (JobService.CreateUiLogin); called on a gRPC thread.
using UiLoginFn = std::function<StatusOr<v1::CreateUiLoginResponse>(const Principal& who)>;

// Bounds of the per-stream queues.
struct StreamLimits {
  // Messages queued for one worker before it counts as stuck and its stream is dropped
  // (it reconnects and reconciles). A 10,000-rank attempt's launch is one message per worker.
  size_t worker_queue = 4096;
  // Updates queued for one `convoy watch` before the watcher counts as too slow.
  size_t watch_queue = 1024;
};

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

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  JobServiceImpl(Coordinator& coordinator, Authorizer& auth, StreamLimits limits = {})
      : coordinator_(coordinator), auth_(auth), limits_(limits) {}

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
  void SetTokenStore(TokenStore* tokens) { tokens_ = tokens; }
  // CreateUiLogin's answer for an authorised caller (the web UI's one-time login link,
  // coordinator/web). Before the server starts; empty: FAILED_PRECONDITION, no web UI.
  void SetUiLogin(UiLoginFn ui_login) { ui_login_ = std::move(ui_login); }

 private:
  Coordinator& coordinator_;
  Authorizer& auth_;
  const StreamLimits limits_;
  CodeStore* code_ = nullptr;
  TokenStore* tokens_ = nullptr;
  UiLoginFn ui_login_;
};

// The cluster's certificate authority as the coordinator holds it.
struct ClusterCa {
  // The CA's certificate and key; the key is empty when the operator brought their own PKI
  // (--tls-ca): then the coordinator issues nothing and Join answers FAILED_PRECONDITION.
  KeyAndCert ca;
  std::string fingerprint;
  // The cluster's id (coordinator/store/cluster_id.h), answered by GetClusterInfo.
  std::string cluster_id;
  // Lifetime of the client certificates it issues to workers (they renew at 2/3 of it).
  int64_t worker_cert_ttl_s = 24 * 3600;
};

// JoinService (proto/convoy/v1/auth.proto): the CA certificate for anyone, a worker
// certificate for a join token, a renewed one for a worker's current certificate.
class JoinServiceImpl final : public v1::JoinService::CallbackService {
 public:
  // `ca` null: --insecure, nothing to hand out. `connected(name)`: a worker of that name has
  // its stream open.
  JoinServiceImpl(Authorizer& auth, const ClusterCa* ca, TokenStore* tokens, const Clock& clock,
                  std::function<bool(const std::string&)> connected)
      : auth_(auth), ca_(ca), tokens_(tokens), clock_(clock), connected_(std::move(connected)) {}

  grpc::ServerUnaryReactor* GetClusterInfo(grpc::CallbackServerContext* context,
                                           const v1::GetClusterInfoRequest* req,
                                           v1::ClusterInfo* resp) override;
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context, const v1::JoinRequest* req,
                                 v1::JoinResponse* resp) override;
  grpc::ServerUnaryReactor* Renew(grpc::CallbackServerContext* context, const v1::RenewRequest* req,
                                  v1::JoinResponse* resp) override;

 private:
  Status Issue(const std::string& name, const std::string& csr_pem, v1::JoinResponse* resp);
  // Who holds `name` now ("a connected worker", "a certificate valid until ..."); empty:
  // nobody, a join token may take it.
  StatusOr<std::string> Holder(const std::string& name);

  Authorizer& auth_;
  const ClusterCa* const ca_;
  TokenStore* const tokens_;
  const Clock& clock_;
  const std::function<bool(const std::string&)> connected_;
  // One Join at a time: the check that a name is free and the record of its new certificate
  // are one step (Joins are rare; only they wait on it, never the state lock).
  Mutex join_mu_;
};

}  // namespace convoy

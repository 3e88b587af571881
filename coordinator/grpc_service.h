// The gRPC services of convoy-coordinator. They only translate messages and statuses and
// take the state lock around JobManager calls; all decisions are JobManager's.
//
// Threading: gRPC's sync server runs each call on its own thread. `state_mu` (owned by the
// caller, see main.cc) guards JobManager and WorkerRegistry. Lock order: state_mu, then
// WorkerStreams::mu_, then a Session's mu. Each worker stream has a writer thread that
// drains its queue, so that JobManager's sends never block on the network.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "convoy/v1/job.grpc.pb.h"
#include "convoy/v1/worker.grpc.pb.h"
#include "coordinator/job_manager.h"

namespace convoy {

// grpc::Status for a convoy::Status.
grpc::Status ToGrpc(const Status& status);

// The open worker streams, by worker name.
class WorkerStreams : public WorkerChannel {
 public:
  struct Session {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<v1::CoordinatorMessage> queue;  // guarded by mu
    bool closed = false;                       // guarded by mu
    grpc::ServerContext* context = nullptr;
  };

  bool Send(const std::string& name, const v1::CoordinatorMessage& msg) override;
  // Makes `session` the worker's stream, closing (and cancelling) any previous one.
  void Attach(const std::string& name, std::shared_ptr<Session> session);
  // Removes `session` if it is still the worker's stream; true when it was.
  bool Detach(const std::string& name, const std::shared_ptr<Session>& session);
  // Closes every stream (shutdown).
  void CloseAll();

  static void Close(Session& session);

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;  // guarded by mu_
};

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  WorkerServiceImpl(std::mutex& state_mu, JobManager& jobs, WorkerStreams& streams)
      : state_mu_(state_mu), jobs_(jobs), streams_(streams) {}

  grpc::Status Connect(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>* stream) override;

 private:
  std::mutex& state_mu_;
  JobManager& jobs_;
  WorkerStreams& streams_;
};

class JobServiceImpl final : public v1::JobService::Service {
 public:
  JobServiceImpl(std::mutex& state_mu, JobManager& jobs) : state_mu_(state_mu), jobs_(jobs) {}

  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* req,
                         v1::SubmitJobResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* req, v1::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* req,
                         v1::Job* resp) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::WatchJobResponse>* writer) override;
  grpc::Status GetLogs(grpc::ServerContext* context, const v1::GetLogsRequest* req,
                       grpc::ServerWriter<v1::LogChunk>* writer) override;
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest* req,
                           v1::ListWorkersResponse* resp) override;

 private:
  std::mutex& state_mu_;
  JobManager& jobs_;
};

}  // namespace convoy

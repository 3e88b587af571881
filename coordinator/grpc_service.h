// The gRPC services of convoy-coordinator on gRPC's callback API: no thread per call or
// stream, no polling. They translate messages and statuses and call the Coordinator, which
// makes every decision (coordinator/coordinator.h).
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

#include "convoy/v1/job.grpc.pb.h"
#include "convoy/v1/worker.grpc.pb.h"
#include "coordinator/coordinator.h"

namespace convoy {

// grpc::Status for a convoy::Status.
grpc::Status ToGrpc(const Status& status);

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
  WorkerServiceImpl(Coordinator& coordinator, StreamLimits limits = {})
      : coordinator_(coordinator), limits_(limits) {}

  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext* context) override;

 private:
  Coordinator& coordinator_;
  const StreamLimits limits_;
};

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  JobServiceImpl(Coordinator& coordinator, StreamLimits limits = {})
      : coordinator_(coordinator), limits_(limits) {}

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
  grpc::ServerWriteReactor<v1::WatchJobResponse>* WatchJob(grpc::CallbackServerContext* context,
                                                           const v1::WatchJobRequest* req) override;
  grpc::ServerWriteReactor<v1::LogChunk>* GetLogs(grpc::CallbackServerContext* context,
                                                  const v1::GetLogsRequest* req) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* req,
                                        v1::ListWorkersResponse* resp) override;

 private:
  Coordinator& coordinator_;
  const StreamLimits limits_;
};

}  // namespace convoy

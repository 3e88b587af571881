// The worker's one long-lived stream to the coordinator (WorkerService.Connect): dials,
// registers with the supervisor's state, forwards coordinator messages to the supervisor,
// and reconnects with exponential backoff (100 ms doubling to 5 s, with jitter) forever.
//
// Threading: Run occupies the calling thread. Send may be called from any thread; writes
// are serialized by `mu_`, which also guards the current stream.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "convoy/v1/worker.grpc.pb.h"
#include "worker/supervisor.h"

namespace convoy {

class CoordinatorConnection : public Outbox {
 public:
  explicit CoordinatorConnection(const std::string& target);

  void SetSupervisor(Supervisor* supervisor) { supervisor_ = supervisor; }
  // Connects, serves and reconnects until Shutdown.
  void Run();
  // Ends Run: cancels the current stream and stops reconnecting.
  void Shutdown();

  bool Send(const v1::WorkerMessage& msg) override;

 private:
  // One connection's life; returns when the stream ends.
  void Serve();

  const std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  Supervisor* supervisor_ = nullptr;
  std::atomic<bool> stopping_{false};

  std::mutex mu_;
  grpc::ClientContext* context_ = nullptr;  // guarded by mu_
  grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>* stream_ = nullptr;
  bool registered_ = false;  // guarded by mu_
};

}  // namespace convoy

// The worker's one long-lived stream to the coordinator (WorkerService.Connect): dials,
// registers with the supervisor's state (Register is the first message of every stream),
// forwards coordinator messages to the supervisor, and reconnects forever with exponential
// backoff (100 ms doubling to 5 s, with jitter) until Shutdown.
//
// Threading: Run occupies the calling thread (the "connection thread"), which also reads
// the stream. Send may be called from any thread (the supervisor's); writes are serialized
// by `mu_`, which also guards the current stream. A write blocks while gRPC's flow control
// holds it back; keepalive pings (5 s) fail it when the coordinator is really gone. Lock
// order: the supervisor's lock may be held when calling Send; the connection thread never
// calls into the supervisor while holding `mu_`.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "convoy/v1/worker.grpc.pb.h"
#include "worker/supervisor.h"

namespace convoy {

class CoordinatorConnection : public Outbox {
 public:
  // `target` is HOST:PORT. Plain text only (TLS is not implemented yet).
  explicit CoordinatorConnection(const std::string& target);

  // Must be called before Run.
  void SetSupervisor(Supervisor* supervisor) { supervisor_ = supervisor; }
  // Connects, serves and reconnects until Shutdown.
  void Run();
  // Ends Run soon: cancels the current stream and stops reconnecting. Any thread.
  void Shutdown();

  // Writes `msg` on the current stream once it is registered (the RegisterAck came); false
  // when there is none or the write failed. Any thread.
  bool Send(const v1::WorkerMessage& msg) override;

 private:
  // One connection's life; returns when the stream ends.
  void Serve();
  // Sleeps up to `ms`, less when Shutdown is called.
  void SleepMs(int ms);

  const std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  Supervisor* supervisor_ = nullptr;
  std::atomic<bool> stopping_{false};

  std::mutex mu_;
  std::condition_variable wake_;            // Shutdown wakes a backoff sleep
  grpc::ClientContext* context_ = nullptr;  // guarded by mu_
  grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>* stream_ =
      nullptr;               // guarded by mu_
  bool registered_ = false;  // guarded by mu_
  int failures_ = 0;         // connection thread only: registrations failed in a row
};

}  // namespace convoy

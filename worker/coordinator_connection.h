// The worker's one long-lived stream to the coordinator (WorkerService.Connect): dials,
// registers with the supervisor's state (Register is the first message of every stream),
// forwards coordinator messages to the supervisor, and reconnects forever with exponential
// backoff (0.5 s doubling to 10 s, with jitter) until Shutdown. Given several coordinators
// (one leads; followers do not listen), it tries the next one at once after a failure, and
// backs off only when every one has failed in a row.
//
// Threading: Run occupies the calling thread (the "connection thread"), which also reads
// the stream. Send may be called from any thread (the supervisor's, with its lock held): it
// only queues, under `mu_`, and never blocks; a writer thread per registered stream drains
// the queue in order, and it is the one that waits while gRPC's flow control holds a write
// back (keepalive pings, 5 s, fail it when the coordinator is really gone). The queue is
// bounded; past the bound Send returns false, as when disconnected. Lock order: the
// supervisor's lock may be held when calling Send; the connection thread never calls into
// the supervisor while holding `mu_`.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>

#include "common/coordinator_list.h"
#include "common/mutex.h"
#include "convoy/v1/worker.grpc.pb.h"
#include "worker/credentials.h"
#include "worker/supervisor.h"

namespace convoy {

class CoordinatorConnection : public Outbox {
 public:
  // `target` is HOST:PORT, or several (a group on etcd: CoordinatorList). `credentials`: TLS
  // (mutual, with the worker's certificate); null: plain text (--insecure, tests). Not owned; must
  // outlive this.
  explicit CoordinatorConnection(const std::string& target,
                                 WorkerCredentials* credentials = nullptr);

  // Must be called before Run.
  void SetSupervisor(Supervisor* supervisor) { supervisor_ = supervisor; }
  // Connects, serves and reconnects until Shutdown.
  void Run();
  // Ends Run soon: cancels the current stream and stops reconnecting. Any thread.
  void Shutdown();

  // Queues `msg` for the current stream once it is registered (the RegisterAck came); false
  // when there is none or its queue is full. Never blocks. Any thread.
  bool Send(const v1::WorkerMessage& msg) override;
  // Whether a stream is registered now (its RegisterAck came and it has not ended): the
  // worker's /readyz. Any thread.
  bool registered() EXCLUDES(mu_);

 private:
  // Makes the channel with the current credentials (connection thread, or the constructor).
  void Dial();
  // One connection's life; returns when the stream ends.
  void Serve();
  // Sleeps up to `ms`, less when Shutdown is called.
  void SleepMs(int ms);

  CoordinatorList coordinators_;
  WorkerCredentials* const credentials_;
  uint64_t generation_ = 0;  // of the credentials channel_ was made with
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  Supervisor* supervisor_ = nullptr;
  std::atomic<bool> stopping_{false};

  Mutex mu_;
  CondVar wake_;  // Shutdown wakes a backoff sleep
  grpc::ClientContext* context_ GUARDED_BY(mu_) = nullptr;
  grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>* stream_ GUARDED_BY(mu_) =
      nullptr;
  bool registered_ GUARDED_BY(mu_) = false;
  std::deque<v1::WorkerMessage> out_ GUARDED_BY(mu_);  // queued for the writer thread
  CondVar out_cv_;                                     // out_ has messages, or the writer must stop
  bool writer_stop_ GUARDED_BY(mu_) = false;
  int failures_ = 0;  // connection thread only: registrations failed in a row
};

}  // namespace convoy

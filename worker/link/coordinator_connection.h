// The worker's one long-lived stream to the coordinator (WorkerService.Connect): dials,
// registers with the supervisor's state (Register is the first message of every stream),
// forwards coordinator messages to the supervisor (its LinkListener), fetching the code
// archive a Launch names into the code cache first (worker/link/code_fetch.h), and reconnects
// forever with exponential backoff (0.5 s doubling to 10 s, with jitter) until Shutdown. Given
// several coordinators (one leads; followers do not listen), it tries the next one at once after a
// failure, and backs off only when every one has failed in a row.
//
// Threading: Run occupies the calling thread (the "connection thread"), which also reads
// the stream and calls the listener. Reports reach the stream through the ReportQueue
// (worker/link/report_queue.h), which any thread may fill without blocking; a writer thread per
// registered stream drains it in order, and it is the one that waits while gRPC's flow
// control holds a write back (keepalive pings, 5 s, fail it when the coordinator is really
// gone). The connection thread never calls the listener while holding `mu_`.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>

#include "common/coordinator_list.h"
#include "common/mutex.h"
#include "convoy/v1/worker.grpc.pb.h"
#include "worker/link/credentials.h"
#include "worker/link/link_listener.h"
#include "worker/link/report_queue.h"

namespace convoy {

class CoordinatorConnection {
 public:
  // `target` is HOST:PORT, or several (a group on etcd: CoordinatorList). `credentials`: TLS
  // (mutual, with the worker's certificate); null: plain text (--insecure, tests). `reports`:
  // what the worker sends, opened for each registered stream; `listener`: told of each
  // stream and given each message; `work_dir`: the worker's --work-dir, whose code cache
  // the archives are fetched into. Not owned; each must outlive this.
  CoordinatorConnection(const std::string& target, WorkerCredentials* credentials,
                        ReportQueue& reports, LinkListener& listener, std::string work_dir);
  // Connects, serves and reconnects until Shutdown.
  void Run();
  // Ends Run soon: cancels the current stream and stops reconnecting. Any thread.
  void Shutdown();

  // Whether a stream is registered now (its RegisterAck came and it has not ended): the
  // worker's /readyz. Any thread.
  bool registered() { return reports_.open(); }

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
  ReportQueue& reports_;
  LinkListener& listener_;
  const std::string work_dir_;
  std::atomic<bool> stopping_{false};

  Mutex mu_;
  CondVar wake_;  // Shutdown wakes a backoff sleep
  grpc::ClientContext* context_ GUARDED_BY(mu_) = nullptr;
  int failures_ = 0;  // connection thread only: registrations failed in a row
};

}  // namespace convoy

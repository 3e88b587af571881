// An in-process test cluster (after Mesos' tests/cluster.hpp): a real coordinator, built by
// the daemon's own composition root (CoordinatorServer) from production's flags, with a real
// SQLite file served over real loopback gRPC on a free port, plus workers, each either
// scripted (the test plays the worker's side of the stream message by message: the network
// edge) or a real in-process convoy-worker (built by WorkerDaemon::Create, running real
// processes). Everything lives in a temp dir and is torn down by the destructor.
//
// Threading: use from the test's thread. Coordinator threads run in the background.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "convoy/v1/job.grpc.pb.h"
#include "convoy/v1/worker.grpc.pb.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/rpc/grpc_server.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/server/flags.h"
#include "coordinator/store/cluster_pki.h"
#include "coordinator/store/token_store.h"
#include "tests/support/temp_dir.h"
#include "worker/daemon/flags.h"

namespace convoy {

class Supervisor;
class WorkerDaemon;

namespace testing {

// One worker stream played by the test.
class ScriptedWorker {
 public:
  // The next message from the coordinator; fails the test (and returns an empty message)
  // when the stream ends first.
  v1::CoordinatorMessage Next();
  // Sends `msg`; false when the stream is broken.
  bool Send(const v1::WorkerMessage& msg);
  // Ends the stream from the worker's side and returns the coordinator's status.
  grpc::Status Close();
  const std::string& name() const { return name_; }

 private:
  friend class TestCluster;
  std::string name_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;  // its own channel, when it has one
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream_;
};

// A real convoy-worker in this process.
class InProcessWorker {
 public:
  ~InProcessWorker();
  const std::string& name() const { return name_; }
  const std::string& work_dir() const { return work_dir_; }
  // Where its jobs' own directories are (<work_dir>/job-root, canonical).
  std::string job_root() const;
  Supervisor& supervisor();

 private:
  friend class TestCluster;
  std::string name_;
  std::string work_dir_;
  SystemClock clock_;
  std::unique_ptr<WorkerDaemon> daemon_;  // stopped (Stop) when destroyed
};

class TestCluster {
 public:
  struct Options {
    // The flags convoy-coordinator is started with: production's defaults (the priority
    // scheduler, TLS, the code store). The cluster sets --state-dir (its temp dir),
    // --listen (loopback, a free port, kept over restarts) and, unless `secure`, --insecure.
    CoordinatorFlags flags;
    // TLS with a CA of the cluster's own in its temp dir, tokens, mutual TLS for workers
    // (as convoy-coordinator serves by default). false: --insecure.
    bool secure = false;
    // What no flag sets (CoordinatorServer::Deps).
    StreamLimits limits;
    int64_t tick_ms = 0;            // 0: production's
    int64_t failure_window_ms = 0;  // 0: production's
    int submit_burst = 0;           // 0: production's
    // --store etcd:// on the test binary's shared etcd member (SharedEtcd), under a prefix of
    // this cluster's own; false: SQLite in the cluster's temp dir. Tests that touch the
    // store run on both (issue 30: "the same results on either store").
    bool etcd = false;
    // The coordinator's clock (not owned; must outlive the cluster); null: the system's.
    // A FakeClock here moves only the coordinator's time (retention, timeouts); workers
    // keep the system clock.
    const Clock* clock = nullptr;
  };
  // Production's flags with /metrics on a free loopback port, and short timeouts that keep
  // tests quick (a 20 ms tick, a failure window of 100 ms).
  static Options DefaultOptions();

  explicit TestCluster(Options options = DefaultOptions());
  ~TestCluster();

  // Starts the coordinator (again, after StopCoordinator: same state file, same port).
  void StartCoordinator();
  // Stops the coordinator as SIGTERM would; the state file stays.
  void StopCoordinator();

  // "127.0.0.1:PORT".
  std::string address() const;
  Coordinator& coordinator() { return server_->coordinator(); }
  CoordinatorServer& server() { return *server_; }
  v1::JobService::Stub& jobs() { return *job_stub_; }
  const TempDir& dir() const { return dir_; }
  // The state database (SQLite), for tests that look at its rows.
  std::string db_path() const { return dir_ / "convoy.db"; }
  // How many records the store holds that are keyed by job `id` (the job, its attempts,
  // events and metric history, and, with `with_file_deletion`, its pending file deletions),
  // on either store; -1 when the store cannot be read.
  int StoredRecordsOf(const std::string& id, bool with_file_deletion = true);

  // Connects a scripted worker, reporting `attempts` as a worker that comes back does, and
  // waits for its RegisterAck. When secure, with a client certificate for `name`.
  std::unique_ptr<ScriptedWorker> ConnectScripted(
      const std::string& name, int slots = 1, const std::vector<v1::AttemptStatus>& attempts = {});
  // Opens a worker stream on `channel` and sends Register for `name` without waiting.
  std::unique_ptr<ScriptedWorker> OpenScripted(const std::shared_ptr<grpc::Channel>& channel,
                                               const std::string& name, int slots = 1);

  // ---- Secure clusters.
  const ClusterPki& pki() const { return pki_; }
  TokenStore& tokens() { return *server_->tokens(); }
  // A token for `user` with `role` (expiring after `ttl_ms`, 0: never).
  // `name`: a join token bound to that worker name.
  std::string MakeToken(const std::string& user, Role role, int64_t ttl_ms = 0, int uses = 0,
                        const std::string& name = "");
  // A channel that verifies the coordinator with the cluster CA and sends `token` (if any)
  // and the client certificate `key_cert` (if any).
  std::shared_ptr<grpc::Channel> SecureChannel(const std::string& token,
                                               const KeyAndCert* key_cert = nullptr);
  // A client certificate for worker `name` signed by `ca` (the cluster's when null), valid
  // from `not_before_s` to `not_after_s` (now-1h .. now+1h when both are 0).
  KeyAndCert WorkerCertificate(const std::string& name, const KeyAndCert* ca = nullptr,
                               int64_t not_before_s = 0, int64_t not_after_s = 0);
  // Starts a real worker with `slots` slots, built by convoy-worker's own composition root
  // (WorkerDaemon::Create) from its flags: production's defaults except --work-dir (in the
  // cluster's temp dir), --cores/--slots `slots`, --gpus none, --kill-grace-ms 1000 (quick
  // tests), --cgroups off, --snapshot-dir none and --warm-trainers 0 (test jobs are shell
  // commands; the e2e suite runs those three as shipped), and, when the test runs as root,
  // --run-as root --allow-root-jobs: a worker process of the test's own cannot give ranks
  // other identities that reach the test's 0700 temp dir (the e2e suite runs the identity
  // pool). Secure clusters: joined with a join token and the CA's fingerprint; else
  // --insecure. `tune` changes any flag before Create. Returns once it registered.
  InProcessWorker& StartWorker(const std::string& name, int slots = 1,
                               const std::function<void(WorkerFlags*)>& tune = {});

  // Conveniences over the client API; each fails the test on an RPC error.
  std::string Submit(const v1::JobSpec& spec);
  v1::Job GetJob(const std::string& id);
  // Waits until the job is in `state` (at most `timeout`); false otherwise.
  bool WaitForState(const std::string& id, v1::JobState state,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Polls `pred` every 10 ms for at most `timeout`.
  static bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);
  // With `etcd`: the key prefix of this cluster's coordinator ("/t<pid>-<n>/convoy/").
  const std::string& etcd_prefix() const { return etcd_prefix_; }

 private:
  const Options options_;
  TempDir dir_{"convoy-cluster"};
  std::string etcd_prefix_;  // options_.etcd
  int port_ = 0;
  SystemClock clock_;
  std::unique_ptr<CoordinatorServer> server_;
  ClusterPki pki_;  // the server's, kept while it is stopped
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> job_stub_;
  std::unique_ptr<v1::WorkerService::Stub> worker_stub_;
  std::vector<std::unique_ptr<InProcessWorker>> workers_;
};

}  // namespace testing
}  // namespace convoy

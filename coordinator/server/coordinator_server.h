// The coordinator daemon's one composition root (issue 29): `convoy-coordinator serve` and
// the test cluster (tests/support/test_cluster.h) both build the daemon here, from the same
// parsed flags and with the same production defaults: the cluster id, the CA and serving
// certificate, the token store, the SQLite state, the scheduler the flags name (priority by
// default), the code store and its collection, the metrics exporter, the gRPC server and its
// plain-text health port. What is the process's own (signals, the open-file limit, systemd's
// readiness and watchdog) stays in main.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/rpc/grpc_server.h"
#include "coordinator/server/flags.h"
#include "coordinator/store/cluster_pki.h"
#include "coordinator/store/etcd_client.h"

namespace convoy {

class CodeStore;
class MetricsExporter;
class PriorityScheduler;
class FifoScheduler;
class Scheduler;
class EtcdClient;
class JobStore;
class LeaderElection;
class TokenStore;
class HealthServer;
class UiServer;
class ClusterFeed;

// --store etcd://... and --etcd-ca/--etcd-cert/--etcd-key as the etcd client's options (the
// daemon, --check-config and the token commands dial etcd alike).
StatusOr<EtcdOptions> EtcdOptionsFromFlags(const CoordinatorFlags& flags);

class CoordinatorServer {
 public:
  // What no flag sets. Production passes none of it.
  struct Deps {
    // The coordinator's clock (not owned; outlives the server); null: the system's. The
    // certificates are always made on the system's: TLS checks them against real time.
    const Clock* clock = nullptr;
    StreamLimits limits;
    // Knobs without a flag, applied after the flags' values (tests shorten the tick and
    // the failure window, or set a submit burst).
    std::function<void(CoordinatorOptions*)> tune_options;
    std::function<void(AuthOptions*)> tune_auth;
    // With an etcd store, a follower waits in Create until it leads; it gives up (an
    // UNAVAILABLE error) once this says so (main: SIGTERM or SIGINT pending).
    std::function<bool()> stop_requested;
    // Called at each poll while Create waits (for etcd, or a follower to lead), with what it
    // waits for: main tells systemd (ready, its status, and the watchdog), so that a
    // follower is a started service, not one that failed to start.
    std::function<void(const std::string& status)> waiting;
    // With an etcd store: the leadership was lost. Null: a critical log line and exit 1
    // (crash-only: systemd restarts the coordinator, which campaigns again as a follower).
    std::function<void(const std::string& why)> on_leadership_lost;
  };

  // Builds and starts everything `flags` (parsed and checked by ParseCoordinatorFlags) asks
  // for, and serves. An error names what failed; INVALID_ARGUMENT is a usage error (main
  // exits 2 for it, 1 for the rest).
  static StatusOr<std::unique_ptr<CoordinatorServer>> Create(const CoordinatorFlags& flags,
                                                             Deps deps);
  static StatusOr<std::unique_ptr<CoordinatorServer>> Create(const CoordinatorFlags& flags) {
    return Create(flags, Deps());
  }
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // Stops serving (calls in flight get `grace_ms`), then the coordinator: what is queued is
  // committed; training keeps running on the workers. Idempotent; the destructor calls it.
  void Shutdown(int grace_ms = 2000);

  Coordinator& coordinator() { return *coordinator_; }
  int port() const { return server_->port(); }
  // The SQLite file, or the etcd store's URL.
  const std::string& db_path() const { return db_path_; }
  const std::string& cluster_id() const { return cluster_id_; }
  // Without --insecure: the tokens and the PKI (the CA's key only when the cluster made it).
  TokenStore* tokens() { return tokens_.get(); }
  const ClusterPki& pki() const { return pki_; }
  CodeStore& code() { return *code_; }
  // With --metrics-listen, else null.
  MetricsExporter* exporter() { return exporter_.get(); }
  // With --ui-listen, else null.
  UiServer* ui() { return ui_.get(); }

 private:
  CoordinatorServer() = default;
  Status Build(const CoordinatorFlags& flags, Deps deps);
  // Without --insecure, before anything serves: the PKI (the cluster's CA, made at the first
  // start, or the operator's), the token store, and what the gRPC server's security needs.
  Status Secure(const CoordinatorFlags& flags, ServerSecurity* security);
  // The Coordinator's options from the flags (INVALID_ARGUMENT for a bad --quota); makes the
  // scheduler the flags name.
  StatusOr<CoordinatorOptions> OptionsFrom(const CoordinatorFlags& flags);
  // --store etcd://, before anything else: the client and the cluster id kept in etcd
  // (waiting for etcd while it is unreachable).
  Status ConnectEtcd(const CoordinatorFlags& flags, const Deps& deps);
  // --store etcd://, once TLS and the tokens are ready: the campaign (blocking until this
  // coordinator leads; a follower serves nothing but --health-listen meanwhile, so that
  // workers and clients that know every coordinator find the leader) and the fenced store.
  Status Lead(const CoordinatorFlags& flags, const Deps& deps);
  // The cluster CA is shared by every coordinator of an etcd group, never kept in etcd: only
  // its fingerprint is (<prefix>ca-fingerprint, written by the first coordinator).
  // RefuseSecondCa, before the PKI is loaded: a coordinator without <state-dir>/tls/ca.crt
  // does not make a CA of its own once the cluster has one. CheckClusterCa, after: the CA
  // loaded must be the cluster's.
  Status RefuseSecondCa(const CoordinatorFlags& flags);
  Status CheckClusterCa(const CoordinatorFlags& flags);
  static std::string CaFingerprintKey(const CoordinatorFlags& flags);
  static bool Stopping(const Deps& deps);
  // --ui-listen: binds the web UI before a follower campaigns (it redirects to the leader
  // until this coordinator leads; UiServer::Attach then serves it).
  Status StartUi(const CoordinatorFlags& flags, const Clock& clock);
  // Every 10 s, tokens' last use is written; every 6th round, code archives that no kept job
  // names (stored over 10 minutes ago) are removed (CodeStore::Collect).
  void Housekeep();

  SystemClock system_clock_;
  std::string db_path_;
  std::string cluster_id_;
  ClusterPki pki_;
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<EtcdClient> etcd_;
  std::unique_ptr<LeaderElection> election_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<const Scheduler> scheduler_;
  std::unique_ptr<MetricsExporter> exporter_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CodeStore> code_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<HealthServer> health_;  // --health-listen
  std::unique_ptr<ClusterFeed> ui_feed_;  // --ui-listen: the list pages' changes
  std::unique_ptr<UiServer> ui_;          // --ui-listen
  std::mutex housekeeping_mu_;
  std::condition_variable housekeeping_cv_;
  bool stopping_ = false;  // guarded by housekeeping_mu_
  std::thread housekeeping_;
  bool shut_down_ = false;
};

}  // namespace convoy

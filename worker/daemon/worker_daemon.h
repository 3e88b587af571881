// convoy-worker's one composition root: everything the daemon is made of, built from its
// flags. main parses the flags, creates the daemon, waits for SIGTERM or SIGINT and stops it;
// the test cluster (tests/support/test_cluster.h) and every test that needs a whole worker
// build it here too, from flags and Deps, as CoordinatorServer::Create does for the
// coordinator.
//
// Create prepares the work dir and the job root, discovers this machine's cores, memory and
// GPUs, resolves the user ranks run as (one identity per job with --run-as pool), opens the
// cgroups, loads the credentials, starts the warm trainer and Python, the /metrics server and
// the attempt-directory retention; Start connects to the coordinator; Stop stops every rank,
// reports their exits and closes the stream. What Create opened is closed when the daemon is
// destroyed, and a Create that fails leaves nothing behind (no cgroup, no process).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "worker/daemon/flags.h"
#include "worker/host/users.h"

namespace convoy {

class AttemptDirRetention;
class CoordinatorConnection;
class HealthMonitor;
class MetricsHttpServer;
class Nvml;
class PosixProcessLauncher;
class ProcessLauncher;
class ReportQueue;
class Supervisor;
class WarmTrainerLauncher;
class WorkerCredentials;
struct WorkerConfig;

class WorkerDaemon {
 public:
  // What no flag sets. Production passes none of it.
  struct Deps {
    // The daemon's clock (not owned; outlives the daemon); null: the system's. The
    // certificates are always checked against real time.
    const Clock* clock = nullptr;
    // Applied to the configuration resolved from the flags, before the supervisor is made
    // (tests: the hostname Register carries, a hook that holds a copy or an unpack).
    std::function<void(WorkerConfig*)> tune_config;
  };

  // INVALID_ARGUMENT for a configuration that cannot run (a flag's value, a directory, the
  // user ranks would run as): convoy-worker exits 2; any other error: it exits 1. Each message
  // names the flag or the file.
  static StatusOr<std::unique_ptr<WorkerDaemon>> Create(const WorkerFlags& flags, Deps deps);
  static StatusOr<std::unique_ptr<WorkerDaemon>> Create(const WorkerFlags& flags) {
    return Create(flags, Deps());
  }
  ~WorkerDaemon();
  WorkerDaemon(const WorkerDaemon&) = delete;
  WorkerDaemon& operator=(const WorkerDaemon&) = delete;

  // Connects to the coordinator and serves it (a thread of its own) until Stop.
  void Start();
  // Stops the data-cache filler and every rank (reporting their exits while the stream is
  // still up), then the stream.
  void Stop();

  Supervisor& supervisor() { return *supervisor_; }
  const WorkerConfig& config() const { return *config_; }
  // The port of /metrics, /healthz and /readyz (--metrics-listen; its port 0 picks a free
  // one); 0 without.
  int metrics_port() const;

 private:
  WorkerDaemon();
  // The configuration from the flags: this machine (ResolveMachine), the users ranks run as
  // (ResolveUsers) and the directories (ResolveDirectories).
  Status ResolveMachine(const WorkerFlags& flags, std::unique_ptr<Nvml>* nvml);
  // Returns the user that stands for the ranks in the checks of what they can reach.
  StatusOr<std::optional<RunAsUser>> ResolveUsers(const WorkerFlags& flags);
  Status ResolveDirectories(const WorkerFlags& flags, const std::optional<RunAsUser>& ranks_user);
  // The ranks' cgroups (--cgroups), removed when the daemon goes.
  Status OpenCgroups(const WorkerFlags& flags);
  // The cold launcher, and the warm trainer and Python when the flags ask for them; returns
  // the one ranks start with.
  ProcessLauncher* StartLaunchers(const WorkerFlags& flags);
  // /metrics, /healthz, /readyz (--metrics-listen); ready while registered.
  Status StartHttp(const WorkerFlags& flags, std::unique_ptr<Nvml> nvml);
  // --attempt-dir-retention.
  void StartRetention(const WorkerFlags& flags);
  // The health checks (--health-check and the built-in ones), on a thread of their own;
  // their verdict goes out with the Register and every heartbeat.
  void StartHealth(const WorkerFlags& flags);

  SystemClock system_clock_;
  const Clock* clock_ = &system_clock_;
  std::string coordinator_;
  std::unique_ptr<WorkerConfig> config_;
  std::unique_ptr<WorkerCredentials> credentials_;
  std::unique_ptr<ReportQueue> reports_;
  std::unique_ptr<CoordinatorConnection> connection_;
  std::shared_ptr<void> remove_cgroups_;  // removes the worker's cgroups when reset
  std::unique_ptr<PosixProcessLauncher> cold_launcher_;
  std::unique_ptr<WarmTrainerLauncher> warm_launcher_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<MetricsHttpServer> http_;
  std::unique_ptr<AttemptDirRetention> retention_;
  std::unique_ptr<Nvml> health_nvml_;
  std::unique_ptr<HealthMonitor> health_;  // stopped after the supervisor (its heartbeats read it)
  std::thread connection_thread_;
  bool supervising_ = false;  // the supervisor was started
  bool stopped_ = false;
};

}  // namespace convoy

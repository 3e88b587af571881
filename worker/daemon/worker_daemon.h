// convoy-worker's one composition root: everything the daemon is made of, built from its
// flags. main parses the flags, creates the daemon, waits for SIGTERM or SIGINT and stops it.
//
// Create prepares the work dir and the job root, discovers this machine's cores, memory and
// GPUs, resolves the user ranks run as (one identity per job with --run-as pool), opens the
// cgroups, loads the credentials, starts the warm trainer and Python, the /metrics server and
// the attempt-directory retention; Start connects to the coordinator; Stop stops every rank,
// reports their exits and closes the stream. What Create opened is closed when the daemon is
// destroyed, and a Create that fails leaves nothing behind (no cgroup, no process).
#pragma once

#include <memory>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "worker/daemon/flags.h"

namespace convoy {

class AttemptDirRetention;
class CoordinatorConnection;
class MetricsHttpServer;
class PosixProcessLauncher;
class ReportQueue;
class Supervisor;
class WarmTrainerLauncher;
class WorkerCredentials;
struct WorkerConfig;

class WorkerDaemon {
 public:
  // INVALID_ARGUMENT for a configuration that cannot run (a flag's value, a directory, the
  // user ranks would run as): convoy-worker exits 2; any other error: it exits 1. Each message
  // names the flag or the file.
  static StatusOr<std::unique_ptr<WorkerDaemon>> Create(const WorkerFlags& flags,
                                                        const Clock& clock);
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

 private:
  WorkerDaemon();

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
  std::thread connection_thread_;
  bool supervising_ = false;  // the supervisor was started
  bool stopped_ = false;
};

}  // namespace convoy

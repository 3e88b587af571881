// convoy-coordinator: wires the store, the job manager, the gRPC services, the ticker and
// the metrics exporter together. Decisions live in JobManager, threads and locks in
// Coordinator.
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "common/clock.h"
#include "common/fd_limit.h"
#include "common/signals.h"
#include "coordinator/coordinator.h"
#include "coordinator/flags.h"
#include "coordinator/grpc_server.h"
#include "coordinator/metrics_exporter.h"
#include "coordinator/sqlite_job_store.h"

int main(int argc, char** argv) {
  using namespace convoy;
  CoordinatorFlags flags;
  int exit_code = 0;
  Status parsed = ParseCoordinatorFlags(argc, argv, &flags, &exit_code);
  if (!parsed.ok()) {
    if (exit_code != 0 && !parsed.message().empty() && exit_code == 2) {
      spdlog::error("{}", parsed.message());
    }
    return exit_code;
  }
  if (exit_code != 0) return exit_code;
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ coordinator: %v");
  spdlog::warn("--insecure: gRPC is plain text and unauthenticated; use only on a trusted host");

  // Blocked in every thread; main waits for them below.
  sigset_t signals = BlockShutdownSignals();

  // Debian's abseil checks every absl::Mutex acquisition for lock-order cycles (a graph of
  // every mutex gRPC ever made): with thousands of connections that was the largest single
  // cost in the coordinator's profile. Convoy's own locks are checked by clang's analysis.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Every worker holds a connection: thousands of descriptors.
  const FileLimit files = RaiseFileLimit();
  if (files.ok) {
    spdlog::info("open-file limit: soft {} (was {}), hard {}", files.soft, files.before,
                 files.hard);
  } else {
    spdlog::warn("open-file limit: could not raise the soft limit {} to the hard limit {}",
                 files.before, files.hard);
  }

  std::error_code ec;
  std::filesystem::create_directories(flags.state_dir, ec);
  if (ec) {
    spdlog::error("--state-dir {}: {}", flags.state_dir, ec.message());
    return 1;
  }
  const std::string db_path = flags.state_dir + "/convoy.db";
  auto store = SqliteJobStore::Open(db_path);
  if (!store.ok()) {
    spdlog::error("{}", store.status().message());
    return 1;
  }

  SystemClock clock;
  CoordinatorOptions options;
  options.worker_timeout_ms = static_cast<int64_t>(flags.worker_timeout_s * 1000);
  options.jobs.kill_grace_ms = flags.kill_grace_ms;
  options.jobs.rendezvous_timeout_ms = static_cast<int64_t>(flags.rendezvous_timeout_s * 1000);
  options.jobs.heartbeat_interval_ms = flags.heartbeat_interval_ms;
  Coordinator coordinator(clock, **store, options);

  std::unique_ptr<MetricsExporter> exporter;
  if (!flags.metrics_listen.empty()) {
    try {
      exporter = std::make_unique<MetricsExporter>(flags.metrics_listen);
    } catch (const std::exception& e) {
      spdlog::error("--metrics-listen {}: {}", flags.metrics_listen, e.what());
      return 1;
    }
    spdlog::info("serving /metrics on {}", flags.metrics_listen);
    coordinator.set_on_export(
        [&exporter](const JobManager::Stats& stats, const std::vector<v1::Job>& active) {
          exporter->Update(stats, active);
        });
  }
  Status started = coordinator.Start();
  if (!started.ok()) {
    spdlog::error("cannot load state from {}: {}", db_path, started.message());
    return 1;
  }

  auto server = GrpcServer::Start(coordinator, flags.listen, InsecureForTests());
  if (!server.ok()) {
    spdlog::error("{}", server.status().message());
    return 1;
  }
  spdlog::info("convoy-coordinator {} listening on {} (state {})", CONVOY_VERSION, flags.listen,
               db_path);

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received signal {}; shutting down (training keeps running on the workers)", sig);
  (*server)->Shutdown();
  coordinator.Stop();
  return 0;
}

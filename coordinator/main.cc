// convoy-coordinator: wires the store, the job manager, the gRPC services, the ticker and
// the metrics exporter together. Decisions live in JobManager.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "common/signals.h"
#include "coordinator/flags.h"
#include "coordinator/grpc_service.h"
#include "coordinator/job_manager.h"
#include "coordinator/metrics_exporter.h"
#include "coordinator/sqlite_job_store.h"
#include "coordinator/worker_registry.h"

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
  WorkerRegistry registry(clock, static_cast<int64_t>(flags.worker_timeout_s * 1000));
  WorkerStreams streams;
  JobManagerOptions options;
  options.kill_grace_ms = flags.kill_grace_ms;
  options.rendezvous_timeout_ms = static_cast<int64_t>(flags.rendezvous_timeout_s * 1000);
  options.heartbeat_interval_ms = flags.heartbeat_interval_ms;
  JobManager jobs(clock, **store, registry, streams, options);
  std::mutex state_mu;
  {
    std::lock_guard<std::mutex> lock(state_mu);
    Status st = jobs.Recover();
    if (!st.ok()) {
      spdlog::error("cannot load state from {}: {}", db_path, st.message());
      return 1;
    }
  }

  std::unique_ptr<MetricsExporter> exporter;
  if (!flags.metrics_listen.empty()) {
    try {
      exporter = std::make_unique<MetricsExporter>(flags.metrics_listen);
    } catch (const std::exception& e) {
      spdlog::error("--metrics-listen {}: {}", flags.metrics_listen, e.what());
      return 1;
    }
    spdlog::info("serving /metrics on {}", flags.metrics_listen);
  }

  WorkerServiceImpl worker_service(state_mu, jobs, streams);
  JobServiceImpl job_service(state_mu, jobs);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(flags.listen, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(&worker_service);
  builder.RegisterService(&job_service);
  builder.SetMaxReceiveMessageSize(16 * 1024 * 1024);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    spdlog::error("--listen {}: cannot listen there", flags.listen);
    return 1;
  }
  spdlog::info("convoy-coordinator {} listening on {} (state {})", CONVOY_VERSION, flags.listen,
               db_path);

  std::atomic<bool> stopping{false};
  std::thread ticker([&] {
    auto next_metrics = std::chrono::steady_clock::now();
    while (!stopping) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::vector<v1::Job> job_snapshot;
      std::vector<v1::WorkerInfo> worker_snapshot;
      const bool export_now = exporter && std::chrono::steady_clock::now() >= next_metrics;
      {
        std::lock_guard<std::mutex> lock(state_mu);
        jobs.Tick();
        if (export_now) {
          job_snapshot = jobs.List();
          worker_snapshot = jobs.ListWorkers();
        }
      }
      if (export_now) {
        exporter->Update(job_snapshot, worker_snapshot);
        next_metrics = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      }
    }
  });

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received signal {}; shutting down (training keeps running on the workers)", sig);
  stopping = true;
  streams.CloseAll();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  ticker.join();
  return 0;
}

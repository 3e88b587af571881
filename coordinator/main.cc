// convoy-coordinator: wires the store, the job manager, the gRPC services, the ticker and
// the metrics exporter together. Decisions live in JobManager, threads and locks in
// Coordinator.
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "common/config_file.h"
#include "common/fd_limit.h"
#include "common/signals.h"
#include "common/util.h"
#include "coordinator/admin_commands.h"
#include "coordinator/check_config.h"
#include "coordinator/cluster_id.h"
#include "coordinator/cluster_pki.h"
#include "coordinator/code_store.h"
#include "coordinator/coordinator.h"
#include "coordinator/flags.h"
#include "coordinator/grpc_server.h"
#include "coordinator/metrics_exporter.h"
#include "coordinator/priority_scheduler.h"
#include "coordinator/sqlite_job_store.h"
#include "coordinator/systemd_notify.h"
#include "coordinator/token_store.h"

int main(int argc, char** argv) {
  using namespace convoy;
  // Private by default: the state database, the CA's key, code archives and tokens are
  // nobody else's business (issue 18). Files 0600, directories 0700 unless said otherwise.
  umask(077);
  // Logs go to stderr (stdout is for what the admin commands print: tokens, fingerprints).
  spdlog::set_default_logger(spdlog::stderr_color_mt("convoy-coordinator"));
  CoordinatorFlags flags;
  int exit_code = 0;
  ConfigCheck check;
  Status parsed = ParseCoordinatorFlags(argc, argv, &flags, &exit_code, &check);
  if (!parsed.ok()) {
    if (!parsed.message().empty()) spdlog::error("{}", parsed.message());
    return exit_code;
  }
  if (check.enabled) {
    // deploy/README.md: "configuration OK" and 0, or a "configuration error:" line for each
    // problem and 1.
    std::vector<std::string> notes;
    if (!check.incomplete) CheckCoordinatorConfig(flags, &notes, &check.errors);
    return ReportConfigCheck(check.errors, notes);
  }
  if (flags.command != "serve") return RunAdminCommand(flags);
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ coordinator: %v");
  if (flags.insecure) {
    spdlog::warn("--insecure: gRPC is plain text and unauthenticated; use only on a trusted host");
  }

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
  chmod(flags.state_dir.c_str(), 0700);  // tokens' hashes, the CA's key, every job's spec
  const std::string db_path = flags.state_dir + "/convoy.db";
  bool made_cluster_id = false;
  auto cluster_id = LoadOrMakeClusterId(flags.state_dir, &made_cluster_id);
  if (!cluster_id.ok()) {
    spdlog::error("{}", cluster_id.status().message());
    return 1;
  }
  spdlog::info("cluster id {}{}", *cluster_id, made_cluster_id ? " (made now: a new cluster)" : "");

  // Security first: a coordinator that cannot serve TLS must not start at all.
  ServerSecurity security;
  security.insecure = flags.insecure;
  std::unique_ptr<TokenStore> tokens;
  if (!flags.insecure) {
    const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    StatusOr<ClusterPki> pki = Status::Ok();
    if (!flags.tls_cert.empty()) {
      pki = LoadOwnPki(flags.tls_cert, flags.tls_key, flags.tls_ca, now_s);
    } else {
      auto hp = ParseHostPort(flags.listen, "--listen");
      pki =
          EnsureClusterPki(flags.state_dir + "/tls",
                           ServerNames(hp->first, flags.advertise_address, flags.tls_sans), now_s);
    }
    if (!pki.ok()) {
      spdlog::error("TLS: {}", pki.status().message());
      return 1;
    }
    if (pki->created_ca) {
      spdlog::info("made the cluster CA in {}/tls (first start)", flags.state_dir);
    }
    spdlog::info("cluster CA fingerprint {}", pki->ca_fingerprint);
    auto opened = TokenStore::Open(flags.state_dir + "/tokens.db");
    if (!opened.ok()) {
      spdlog::error("{}", opened.status().message());
      return 1;
    }
    tokens = std::move(*opened);
    security.tokens = tokens.get();
    security.server_cert_pem = pki->server.cert_pem;
    security.server_key_pem = pki->server.key_pem;
    security.ca.ca = pki->ca;
    security.ca.fingerprint = pki->ca_fingerprint;
    security.ca.cluster_id = *cluster_id;
    security.ca.worker_cert_ttl_s = *ParseDuration(flags.worker_cert_ttl, "--worker-cert-ttl");
    security.auth.max_streams_per_token = flags.max_streams_per_token;
    security.auth.submits_per_minute = flags.submits_per_minute;
    security.auth.upload_bytes_per_day = flags.upload_bytes_per_day;
    security.auth.max_archives_per_user = flags.max_archives_per_user;
  }
  security.auth.max_user_priority = flags.max_user_priority;
  auto store = SqliteJobStore::Open(db_path);
  if (!store.ok()) {
    spdlog::error("{}", store.status().message());
    return 1;
  }

  SystemClock clock;
  CoordinatorOptions options;
  options.jobs.cluster_id = *cluster_id;
  options.worker_timeout_ms = static_cast<int64_t>(flags.worker_timeout_s * 1000);
  options.jobs.kill_grace_ms = flags.kill_grace_ms;
  options.jobs.rendezvous_timeout_ms = static_cast<int64_t>(flags.rendezvous_timeout_s * 1000);
  options.jobs.heartbeat_interval_ms = flags.heartbeat_interval_ms;
  PriorityPolicy policy;
  policy.ageing_ms = static_cast<int64_t>(flags.priority_ageing_s * 1000);
  policy.max_slots_per_owner = flags.max_slots_per_user;
  options.jobs.max_queued_per_owner = flags.max_queued_per_user;
  options.jobs.quotas.SetDefaults(flags.max_slots_per_user, flags.max_queued_per_user);
  for (const std::string& rule : flags.quotas) {
    Status st = options.jobs.quotas.Add(rule);
    if (!st.ok()) {
      spdlog::error("{}", st.message());
      return 2;
    }
  }
  options.jobs.refuse_over_quota = flags.over_quota == "refuse";
  options.jobs.preemptible_below = flags.preemptible_below;
  options.jobs.preempt_grace_ms = static_cast<int64_t>(flags.preempt_grace_s * 1000);
  options.jobs.min_resize_interval_ms = static_cast<int64_t>(flags.min_resize_interval_s * 1000);
  const PriorityScheduler priority_scheduler(policy);
  const FifoScheduler fifo_scheduler;
  options.jobs.scheduler = flags.scheduler == "fifo"
                               ? static_cast<const Scheduler*>(&fifo_scheduler)
                               : &priority_scheduler;
  spdlog::info("scheduler: {}{}", flags.scheduler,
               flags.scheduler == "fifo" ? ""
                                         : fmt::format(" (ageing: +1 priority per {} s waiting)",
                                                       flags.priority_ageing_s));
  options.jobs.job_retention_ms = flags.job_retention_ms;
  options.jobs.job_retention_count = flags.job_retention_count;
  if (flags.job_retention != "0") {
    spdlog::info("finished jobs are deleted {} (--job-retention)",
                 flags.job_retention_count > 0
                     ? "beyond the newest " + std::to_string(flags.job_retention_count)
                     : "after " + flags.job_retention);
  }
  Coordinator coordinator(clock, **store, options);

  std::unique_ptr<MetricsExporter> exporter;
  if (!flags.metrics_listen.empty()) {
    MetricsExporter::Options metrics;
    metrics.listen = flags.metrics_listen;
    metrics.retention_ms = static_cast<int64_t>(flags.metrics_retention_s * 1000);
    try {
      exporter = std::make_unique<MetricsExporter>(clock, metrics);
    } catch (const std::exception& e) {
      spdlog::error("--metrics-listen {}: {}", flags.metrics_listen, e.what());
      return 1;
    }
    spdlog::info("serving /metrics on {}", flags.metrics_listen);
    coordinator.set_on_export(
        [&exporter](const Coordinator::ExportSnapshot& snap) { exporter->Update(snap); });
    coordinator.set_on_commit(
        [&exporter](double seconds, size_t writes) { exporter->OnCommit(seconds, writes); });
  }
  Status started = coordinator.Start();
  if (!started.ok()) {
    spdlog::error("cannot load state from {}: {}", db_path, started.message());
    return 1;
  }

  // Code archives of `convoy submit --code` (issue 18): once each, by hash, 0600 in a 0700 dir.
  auto code_store = CodeStore::Open(flags.state_dir + "/code");
  if (!code_store.ok()) {
    spdlog::error("{}", code_store.status().message());
    return 1;
  }
  security.code = code_store->get();
  auto server = GrpcServer::Start(coordinator, flags.listen, std::move(security), StreamLimits{},
                                  exporter.get());
  if (!server.ok()) {
    spdlog::error("{}", server.status().message());
    return 1;
  }
  if (!flags.health_listen.empty()) {
    if (Status h = (*server)->ServeHealthPlaintext(flags.health_listen); !h.ok()) {
      spdlog::error("{}", h.message());
      return 1;
    }
    spdlog::info("serving grpc.health.v1 in plain text on {}", flags.health_listen);
  }
  spdlog::info("convoy-coordinator {} listening on {} ({}; state {})", CONVOY_VERSION, flags.listen,
               flags.insecure ? "PLAIN TEXT" : "TLS", db_path);

  // Tokens' last use is written in batches; every minute, code archives that no kept job
  // names (and that were stored over 10 minutes ago) are removed (CodeStore::Collect).
  std::mutex flush_mu;
  std::condition_variable flush_cv;
  bool stopping = false;
  CodeStore* code = code_store->get();
  std::thread flusher([&] {
    std::unique_lock<std::mutex> lock(flush_mu);
    int round = 0;
    while (!stopping) {
      flush_cv.wait_for(lock, std::chrono::seconds(10));
      if (tokens) tokens->Flush();
      if (++round % 6 == 0) {
        lock.unlock();
        for (const std::string& sha : code->Collect(coordinator.ReferencedCode(), 600)) {
          spdlog::info("code archive {} removed: no job names it", sha);
        }
        lock.lock();
      }
    }
  });

  // systemd (Type=notify): ready once the port serves; the watchdog is fed only while the
  // ticker keeps completing ticks (each takes the state lock), so that a wedged coordinator
  // is restarted by systemd instead of hanging every worker.
  NotifyReady("serving on " + flags.listen);
  std::thread watchdog;
  if (const uint64_t interval_us = WatchdogIntervalUs(); interval_us > 0) {
    spdlog::info("systemd watchdog every {} ms", interval_us / 1000);
    watchdog = std::thread([&, interval_us] {
      uint64_t last = coordinator.ticks();
      std::unique_lock<std::mutex> lock(flush_mu);
      while (!stopping) {
        flush_cv.wait_for(lock, std::chrono::microseconds(interval_us / 3));
        const uint64_t now = coordinator.ticks();
        if (now != last) {
          NotifyWatchdog();
        } else {
          spdlog::warn("the ticker made no progress in {} ms: not feeding the watchdog",
                       interval_us / 3000);
        }
        last = now;
      }
    });
  }

  int sig = 0;
  sigwait(&signals, &sig);
  {
    std::lock_guard<std::mutex> lock(flush_mu);
    stopping = true;
  }
  flush_cv.notify_all();
  flusher.join();
  if (watchdog.joinable()) watchdog.join();
  NotifyStopping();
  spdlog::info("received signal {}; shutting down (training keeps running on the workers)", sig);
  (*server)->Shutdown();
  coordinator.Stop();
  return 0;
}

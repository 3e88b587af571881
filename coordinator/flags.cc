#include "coordinator/flags.h"

#include <CLI/CLI.hpp>

#include "common/util.h"

namespace convoy {

Status ParseCoordinatorFlags(int argc, char** argv, CoordinatorFlags* f, int* exit_code) {
  CLI::App app{"convoy-coordinator: schedules and supervises distributed training jobs"};
  app.set_version_flag("--version", std::string(CONVOY_VERSION));
  app.add_option("--listen", f->listen, "HOST:PORT of the gRPC API")->capture_default_str();
  app.add_option("--state-dir", f->state_dir, "directory of the SQLite state (created)")
      ->required();
  app.add_option("--metrics-listen", f->metrics_listen, "HOST:PORT of the Prometheus /metrics");
  app.add_flag("--insecure", f->insecure, "plain-text gRPC without authentication (local only)");
  app.add_option("--worker-timeout", f->worker_timeout_s,
                 "seconds without heartbeat before a "
                 "worker is lost")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  app.add_option("--kill-grace-ms", f->kill_grace_ms, "SIGTERM to SIGKILL grace on teardown")
      ->check(CLI::Range(0, 600000))
      ->capture_default_str();
  app.add_option("--rendezvous-timeout", f->rendezvous_timeout_s,
                 "seconds from placement until every rank must have started")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--heartbeat-interval-ms", f->heartbeat_interval_ms, "how often workers heartbeat")
      ->check(CLI::Range(50, 60000))
      ->capture_default_str();
  app.add_option("--log-level", f->log_level, "trace|debug|info|warn|error")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return Status::InvalidArgument(e.what());
  }
  for (const auto& [flag, value] : {std::make_pair("--listen", f->listen),
                                    std::make_pair("--metrics-listen", f->metrics_listen)}) {
    if (value.empty()) continue;
    auto hp = ParseHostPort(value, flag);
    if (!hp.ok()) {
      *exit_code = 2;
      return hp.status();
    }
  }
  if (!f->insecure) {
    *exit_code = 2;
    return Status::InvalidArgument(
        "TLS is not implemented yet; pass --insecure for plain-text local use");
  }
  return Status::Ok();
}

}  // namespace convoy

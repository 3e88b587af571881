#include "coordinator/flags.h"

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "common/config_file.h"
#include "common/util.h"
#include "common/version.h"
#include "coordinator/quota.h"

namespace convoy {

StatusOr<int64_t> ParseDuration(const std::string& text, const std::string& flag) {
  if (text == "0") return 0;
  size_t i = 0;
  int64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && n < (int64_t{1} << 40)) {
    n = n * 10 + (text[i++] - '0');
  }
  const std::string unit = text.substr(i);
  int64_t mult = 0;
  if (unit == "s") mult = 1;
  if (unit == "m") mult = 60;
  if (unit == "h") mult = 3600;
  if (unit == "d") mult = 86400;
  if (i == 0 || mult == 0 || n <= 0 || n > 3650 * 86400 / mult) {
    return Status::InvalidArgument(flag + ": '" + text +
                                   "' is not a duration such as 90s, 15m, 1h or 30d");
  }
  return n * mult;
}

Status ParseJobRetention(const std::string& text, int64_t* age_ms, int64_t* count) {
  *age_ms = 0;
  *count = 0;
  if (text == "0") return Status::Ok();
  if (!text.empty() && text.size() <= 9 &&
      text.find_first_not_of("0123456789") == std::string::npos) {
    *count = std::stoll(text);
    return Status::Ok();
  }
  auto s = ParseDuration(text, "--job-retention");
  if (!s.ok()) {
    return Status::InvalidArgument("--job-retention: '" + text +
                                   "' is neither a duration (7d, 12h) nor a count of jobs (1000)");
  }
  *age_ms = *s * 1000;
  return Status::Ok();
}

Status ParseCoordinatorFlags(int argc, char** argv, CoordinatorFlags* f, int* exit_code) {
  CLI::App app{"convoy-coordinator: schedules and supervises distributed training jobs"};
  app.set_version_flag("--version", VersionLine("convoy-coordinator"));
  app.fallthrough();
  AddConfigFileOptions(&app);
  app.add_flag("--check-config", f->check_config,
               "validate the whole configuration (addresses, directories, TLS files) and exit "
               "0, or non-zero with the reason; starts nothing")
      ->configurable(false);
  if (const char* dir = std::getenv("CONVOY_STATE_DIR")) f->state_dir = dir;
  app.add_option("--state-dir", f->state_dir, "directory of the SQLite state and tls/ (created)")
      ->capture_default_str();
  app.add_option("--listen", f->listen, "HOST:PORT of the gRPC API")->capture_default_str();
  app.add_option("--metrics-listen", f->metrics_listen,
                 "HOST:PORT of the Prometheus /metrics (:PORT binds loopback)");
  app.add_option("--health-listen", f->health_listen,
                 "HOST:PORT of a plain-text grpc.health.v1 for probes that cannot speak TLS "
                 "(:PORT binds loopback)");
  app.add_option("--metrics-retention", f->metrics_retention_s,
                 "how long a finished job's series stay on /metrics (600, 600s, 10m, 1h)")
      ->transform(
          CLI::AsNumberWithUnit(std::map<std::string, double>{{"s", 1}, {"m", 60}, {"h", 3600}}))
      ->check(CLI::Range(0.0, 7 * 86400.0))
      ->capture_default_str();
  app.add_option("--job-retention", f->job_retention,
                 "delete finished jobs (rows, and their files on workers) older than this "
                 "(7d, 12h) or beyond the newest N finished (1000); 0: keep every job")
      ->capture_default_str();
  app.add_flag("--insecure", f->insecure,
               "plain-text gRPC without authentication (loopback addresses only)");
  app.add_option("--advertise-address", f->advertise_address,
                 "the name or address clients reach this coordinator by (in its certificate)");
  app.add_option("--tls-san", f->tls_sans, "another name for the serving certificate (repeatable)");
  app.add_option("--tls-cert", f->tls_cert, "your own serving certificate (PEM)");
  app.add_option("--tls-key", f->tls_key, "its private key (PEM)");
  app.add_option("--tls-ca", f->tls_ca, "the CA that signs the workers' client certificates");
  app.add_option("--worker-cert-ttl", f->worker_cert_ttl, "lifetime of issued worker certificates")
      ->capture_default_str();
  app.add_option("--max-streams-per-token", f->max_streams_per_token,
                 "concurrent watch/logs streams per token")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--submits-per-minute", f->submits_per_minute, "submit rate per token")
      ->check(CLI::Range(0.1, 1e6))
      ->capture_default_str();
  app.add_option("--worker-timeout", f->worker_timeout_s,
                 "seconds without heartbeat before a worker is lost")
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
  app.add_option("--scheduler", f->scheduler,
                 "priority (priorities, fair share, reservation) or fifo")
      ->check(CLI::IsMember({"priority", "fifo"}))
      ->capture_default_str();
  app.add_option("--priority-ageing", f->priority_ageing_s,
                 "waiting this long adds 1 to a job's priority (900, 15m, 1h; 0: never)")
      ->transform(
          CLI::AsNumberWithUnit(std::map<std::string, double>{{"s", 1}, {"m", 60}, {"h", 3600}}))
      ->check(CLI::Range(0.0, 30 * 86400.0))
      ->capture_default_str();
  app.add_option("--max-user-priority", f->max_user_priority,
                 "the highest priority a user may give a job (admins: any)")
      ->check(CLI::Range(-1000, 1000))
      ->capture_default_str();
  app.add_option("--max-slots-per-user", f->max_slots_per_user,
                 "processes one user's jobs may run at once; more wait (0: no limit)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--max-queued-per-user", f->max_queued_per_user,
                 "jobs one user may have waiting; more are refused (0: no limit)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--quota", f->quotas,
                 "a quota rule, repeatable: role:ROLE=slots:N,gpus:N,queued:N or user:NAME=...")
      ->check([](const std::string& rule) {
        QuotaRules rules;
        Status st = rules.Add(rule);
        return st.ok() ? std::string() : st.message();
      });
  app.add_option("--over-quota", f->over_quota,
                 "a job over its owner's process or GPU quota: queue (waits) or refuse")
      ->check(CLI::IsMember({"queue", "refuse"}))
      ->capture_default_str();
  app.add_option("--preemptible-below", f->preemptible_below,
                 "jobs of a lower priority are preemptible unless their spec says otherwise")
      ->check(CLI::Range(-1001, 1001))
      ->capture_default_str();
  app.add_option("--preempt-grace", f->preempt_grace_s,
                 "seconds a preempted rank has to checkpoint before SIGKILL (30, 2m)")
      ->transform(
          CLI::AsNumberWithUnit(std::map<std::string, double>{{"s", 1}, {"m", 60}, {"h", 3600}}))
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--min-resize-interval", f->min_resize_interval_s,
                 "least time between two resizes of an elastic job (60, 5m)")
      ->transform(
          CLI::AsNumberWithUnit(std::map<std::string, double>{{"s", 1}, {"m", 60}, {"h", 3600}}))
      ->check(CLI::Range(0.0, 7 * 86400.0))
      ->capture_default_str();
  app.add_option("--log-level", f->log_level, "trace|debug|info|warn|error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();

  CLI::App* init =
      app.add_subcommand("init", "make the cluster CA and print its fingerprint (idempotent)");
  CLI::App* token = app.add_subcommand("token", "bearer tokens of people, join tokens of workers");
  token->require_subcommand(1);
  CLI::App* create = token->add_subcommand("create", "make a token and print it (shown once)");
  create->add_option("--user", f->token_user,
                     "who the token is for (not needed for --role worker)");
  create->add_option("--role", f->token_role, "admin|user|viewer|worker")->required();
  create->add_option("--ttl", f->token_ttl,
                     "lifetime: 90s, 15m, 1h, 30d; 0 never (default 30d, "
                     "join tokens 1h)");
  create->add_option("--uses", f->token_uses, "join tokens: how many workers may use it")
      ->check(CLI::Range(1, 1000000));
  CLI::App* list = token->add_subcommand("list", "tokens without their secrets");
  CLI::App* revoke =
      token->add_subcommand("revoke", "revoke a token (by id) or every token of a user");
  revoke->add_option("id_or_user", f->revoke, "token id or user")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return Status::InvalidArgument(e.what());
  }
  *exit_code = 2;
  if (init->parsed()) f->command = "init";
  if (create->parsed()) f->command = "token create";
  if (list->parsed()) f->command = "token list";
  if (revoke->parsed()) f->command = "token revoke";
  if (f->state_dir.empty()) return Status::InvalidArgument("--state-dir must not be empty");
  if (f->command == "token create") {
    if (f->token_role != "worker" && f->token_user.empty()) {
      return Status::InvalidArgument("--user is required for a person's token");
    }
    if (f->token_role == "worker" && f->token_user.empty()) f->token_user = "join";
    if (!IsValidName(f->token_user)) {
      return Status::InvalidArgument("--user: '" + f->token_user +
                                     "' is not valid: use 1-63 of [A-Za-z0-9._-]");
    }
    if (f->token_ttl.empty()) f->token_ttl = f->token_role == "worker" ? "1h" : "30d";
    auto ttl = ParseDuration(f->token_ttl, "--ttl");
    if (!ttl.ok()) return ttl.status();
    if (f->token_uses > 0 && f->token_role != "worker") {
      return Status::InvalidArgument("--uses applies to join tokens (--role worker) only");
    }
  }
  if (f->command != "serve") {
    *exit_code = 0;
    return Status::Ok();
  }
  for (std::string* addr : {&f->metrics_listen, &f->health_listen}) {
    if (!addr->empty() && addr->front() == ':') *addr = "127.0.0.1" + *addr;
  }
  for (const auto& [flag, value] : {std::make_pair("--listen", f->listen),
                                    std::make_pair("--metrics-listen", f->metrics_listen),
                                    std::make_pair("--health-listen", f->health_listen)}) {
    if (value.empty()) continue;
    auto hp = ParseHostPort(value, flag);
    if (!hp.ok()) return hp.status();
  }
  if (f->insecure) {
    auto hp = ParseHostPort(f->listen, "--listen");
    if (!IsLoopbackHost(hp->first)) {
      return Status::InvalidArgument(
          "--insecure serves plain text without authentication: --listen must be a loopback "
          "address (127.0.0.1, ::1, localhost), not '" +
          hp->first + "'; drop --insecure to serve TLS");
    }
    if (!f->tls_cert.empty() || !f->tls_key.empty() || !f->tls_ca.empty()) {
      return Status::InvalidArgument("--insecure and --tls-cert/--tls-key/--tls-ca conflict");
    }
  }
  const int own = !f->tls_cert.empty() + !f->tls_key.empty() + !f->tls_ca.empty();
  if (own != 0 && own != 3) {
    return Status::InvalidArgument("--tls-cert, --tls-key and --tls-ca go together");
  }
  auto ttl = ParseDuration(f->worker_cert_ttl, "--worker-cert-ttl");
  if (!ttl.ok()) return ttl.status();
  if (*ttl < 300) return Status::InvalidArgument("--worker-cert-ttl: at least 5m");
  CONVOY_RETURN_IF_ERROR(
      ParseJobRetention(f->job_retention, &f->job_retention_ms, &f->job_retention_count));
  *exit_code = 0;
  return Status::Ok();
}

}  // namespace convoy

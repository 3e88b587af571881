#include "coordinator/server/flags.h"

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "common/config_file.h"
#include "common/util.h"
#include "common/version.h"
#include "coordinator/sched/quota.h"
#include "coordinator/store/etcd_client.h"

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

namespace {

// The subcommands, and their own copies of the serve flags they use (so that `init --help`
// lists them; one given after the subcommand wins over the file and the environment).
struct Subcommands {
  CLI::App* init = nullptr;
  CLI::App* create = nullptr;
  CLI::App* list = nullptr;
  CLI::App* revoke = nullptr;
  std::string state_dir, listen, advertise_address;
  std::vector<std::string> tls_sans;
  std::vector<CLI::Option*> state_dir_options;
  // The token commands' --store and --etcd-* (tokens are in etcd with an etcd store): each
  // option given, its value, and the serve flag it sets.
  struct Copy {
    CLI::Option* option;
    std::unique_ptr<std::string> value;
    std::string* to;
  };
  std::vector<Copy> store_copies;
  CLI::Option* listen_option = nullptr;
  CLI::Option* advertise_option = nullptr;
  CLI::Option* san_option = nullptr;
};

// --check-config, where the coordinator keeps its state and serves (gRPC, etcd, /metrics,
// health), and how long finished jobs and their series stay.
void DefineServingOptions(CLI::App& app, CoordinatorFlags* f) {
  app.add_flag("--check-config", f->check_config,
               "validate the whole configuration (addresses, directories, TLS files) and exit "
               "0 (\"configuration OK\"), or 1 with one \"configuration error:\" line per "
               "problem; starts nothing")
      ->configurable(false);
  if (const char* dir = std::getenv("CONVOY_STATE_DIR")) f->state_dir = dir;
  app.add_option("--state-dir", f->state_dir, "directory of the SQLite state and tls/ (created)")
      ->capture_default_str();
  app.add_option("--listen", f->listen, "HOST:PORT of the gRPC API")->capture_default_str();
  app.add_option("--store", f->store,
                 "where jobs and workers are kept: sqlite (in --state-dir) or "
                 "etcd://HOST:PORT,HOST:PORT (coordinators elect a leader on it)")
      ->capture_default_str();
  app.add_option("--etcd-ca", f->etcd_ca, "PEM file: the CA of the etcd members' certificates");
  app.add_option("--etcd-cert", f->etcd_cert, "PEM file: this coordinator's etcd client cert");
  app.add_option("--etcd-key", f->etcd_key, "PEM file: the key of --etcd-cert");
  app.add_option("--etcd-prefix", f->etcd_prefix, "the etcd key prefix of this cluster")
      ->capture_default_str();
  app.add_option("--leader-lease", f->leader_lease_s,
                 "with an etcd store, the leader's lease (2, 2s, 1m): a leader that dies is "
                 "replaced after about this long, one that cannot renew it so long steps down")
      ->transform(CLI::AsNumberWithUnit(std::map<std::string, double>{{"s", 1}, {"m", 60}}))
      ->check(CLI::Range(int64_t{2}, int64_t{60}))
      ->capture_default_str();
  app.add_option("--metrics-listen", f->metrics_listen,
                 "HOST:PORT of the Prometheus /metrics (:PORT binds loopback)");
  app.add_option("--health-listen", f->health_listen,
                 "HOST:PORT of a plain-text grpc.health.v1 for probes that cannot speak TLS "
                 "(:PORT binds loopback)");
  app.add_option("--ui-listen", f->ui_listen,
                 "HOST:PORT of the web UI: HTTPS, or HTTP on loopback with --insecure (:PORT "
                 "binds loopback; `convoy ui` prints a login link)");
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
}

// --insecure, TLS, and the limits each token or user has.
void DefineSecurityOptions(CLI::App& app, CoordinatorFlags* f) {
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
  app.add_option("--upload-bytes-per-day", f->upload_bytes_per_day,
                 "bytes of code each user (not admins) may upload a day (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-archives-per-user", f->max_archives_per_user,
                 "code archives each user (not admins) may keep stored; archives no kept job "
                 "names are removed after 10 minutes (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// Worker liveness, teardown and rendezvous.
void DefineTimeoutOptions(CLI::App& app, CoordinatorFlags* f) {
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
}

// The scheduler, priorities, quotas and preemption.
void DefineSchedulingOptions(CLI::App& app, CoordinatorFlags* f) {
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
  // When nodes are sick (README).
  app.add_option("--node-fault-jobs", f->node_fault_jobs,
                 "cordon a worker where ranks of this many different jobs failed for the "
                 "node's reasons within --node-fault-window (0: never by itself)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--node-fault-window", f->node_fault_window_s,
                 "how long a node's faults count towards --node-fault-jobs (600, 10m, 1h)")
      ->transform(
          CLI::AsNumberWithUnit(std::map<std::string, double>{{"s", 1}, {"m", 60}, {"h", 3600}}))
      ->check(CLI::Range(1.0, 7 * 86400.0))
      ->default_str("10m");
}

// `init` and `token create|list|revoke`, bound to `subs` (and `f`).
void DefineAdminCommands(CLI::App& app, CoordinatorFlags* f, Subcommands* subs) {
  auto state_dir = [subs](CLI::App* sub) {
    subs->state_dir_options.push_back(
        sub->add_option("--state-dir", subs->state_dir,
                        "directory of the SQLite state and tls/ (default /var/lib/convoy, or "
                        "CONVOY_STATE_DIR)"));
  };
  // Where the tokens are: SQLite in --state-dir, or etcd.
  auto token_store = [subs, f](CLI::App* sub) {
    auto add = [&](const char* name, std::string* to, const char* help) {
      auto value = std::make_unique<std::string>();
      CLI::Option* o = sub->add_option(name, *value, help);
      subs->store_copies.push_back({o, std::move(value), to});
    };
    add("--store", &f->store, "sqlite (tokens in --state-dir) or etcd://HOST:PORT,... (in etcd)");
    add("--etcd-ca", &f->etcd_ca, "PEM file: the CA of the etcd members' certificates");
    add("--etcd-cert", &f->etcd_cert, "PEM file: an etcd client certificate");
    add("--etcd-key", &f->etcd_key, "PEM file: the key of --etcd-cert");
    add("--etcd-prefix", &f->etcd_prefix, "the etcd key prefix of the cluster");
  };
  subs->init =
      app.add_subcommand("init", "make the cluster CA and print its fingerprint (idempotent)");
  state_dir(subs->init);
  subs->listen_option = subs->init->add_option(
      "--listen", subs->listen,
      "HOST:PORT the coordinator will serve (its host is in the certificate)");
  subs->advertise_option =
      subs->init->add_option("--advertise-address", subs->advertise_address,
                             "the name or address clients reach the coordinator by");
  subs->san_option = subs->init->add_option(
      "--tls-san", subs->tls_sans, "another name for the serving certificate (repeatable)");
  CLI::App* token = app.add_subcommand("token", "bearer tokens of people, join tokens of workers");
  token->require_subcommand(1);
  subs->create = token->add_subcommand("create", "make a token and print it (shown once)");
  state_dir(subs->create);
  token_store(subs->create);
  subs->create->add_option("--user", f->token_user,
                           "who the token is for (not needed for --role worker)");
  subs->create->add_option("--role", f->token_role, "admin|user|viewer|worker (required)");
  subs->create->add_option("--ttl", f->token_ttl,
                           "lifetime: 90s, 15m, 1h, 30d; 0 never (default 30d, "
                           "join tokens 1h)");
  subs->create
      ->add_option("--uses", f->token_uses, "join tokens: how many workers may use it (default 1)")
      ->check(CLI::Range(1, 1000000));
  subs->create->add_option("--name", f->token_name,
                           "join tokens: bind it to this worker name, which it may join even "
                           "while a worker holds it (replacing that machine)");
  subs->list = token->add_subcommand("list", "tokens without their secrets");
  state_dir(subs->list);
  token_store(subs->list);
  subs->revoke = token->add_subcommand("revoke", "revoke a token (by id) or every token of a user");
  state_dir(subs->revoke);
  token_store(subs->revoke);
  subs->revoke->add_option("id_or_user", f->revoke, "token id or user")->required();
}

// Every option and subcommand of convoy-coordinator, bound to `f` (and `subs`), in the order
// --help lists them.
void DefineOptions(CLI::App& app, CoordinatorFlags* f, Subcommands* subs, ConfigCheck* check) {
  app.set_version_flag("--version", VersionLine("convoy-coordinator"));
  app.fallthrough();
  AddConfigFileOptions(&app, check);
  DefineServingOptions(app, f);
  DefineSecurityOptions(app, f);
  DefineTimeoutOptions(app, f);
  DefineSchedulingOptions(app, f);
  app.add_option("--log-level", f->log_level, "trace|debug|info|warn|error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
  DefineAdminCommands(app, f, subs);
}

// The checks after the parse, every one of them (--check-config reports them all; a start
// refuses at the first). Fills the parsed forms (the retention, ":PORT" addresses).
// `lease_given`: --leader-lease (or leader_lease) was set, not left at its default.
std::vector<Status> ValidateFlags(CoordinatorFlags* f, bool lease_given) {
  std::vector<Status> problems;
  auto check = [&](const Status& s) {
    if (!s.ok()) problems.push_back(s);
  };
  if (f->state_dir.empty())
    problems.push_back(Status::InvalidArgument("--state-dir must not be empty"));
  if (f->command == "token create") {
    if (f->token_role.empty()) {
      problems.push_back(Status::InvalidArgument(
          "token create: --role is required: admin, user, viewer or worker (a join token)"));
      return problems;
    }
    if (f->token_role != "worker" && f->token_user.empty()) {
      problems.push_back(Status::InvalidArgument("--user is required for a person's token"));
      return problems;
    }
    if (f->token_role == "worker" && f->token_user.empty()) f->token_user = "join";
    if (!IsValidName(f->token_user)) {
      problems.push_back(Status::InvalidArgument("--user: '" + f->token_user +
                                                 "' is not valid: use 1-63 of [A-Za-z0-9._-]"));
    }
    if (f->token_ttl.empty()) f->token_ttl = f->token_role == "worker" ? "1h" : "30d";
    check(ParseDuration(f->token_ttl, "--ttl").status());
    if (f->token_uses > 0 && f->token_role != "worker") {
      problems.push_back(
          Status::InvalidArgument("--uses applies to join tokens (--role worker) only"));
    }
    if (!f->token_name.empty() && f->token_role != "worker") {
      problems.push_back(
          Status::InvalidArgument("--name applies to join tokens (--role worker) only"));
    } else if (!f->token_name.empty() && !IsValidName(f->token_name)) {
      problems.push_back(Status::InvalidArgument("--name: '" + f->token_name +
                                                 "' is not valid: use 1-63 of [A-Za-z0-9._-]"));
    }
    // A join token is single-use unless --uses says otherwise: a leaked one joins no more.
    if (f->token_role == "worker" && f->token_uses == 0) f->token_uses = 1;
  }
  if (f->command != "serve") return problems;
  for (std::string* addr : {&f->metrics_listen, &f->health_listen, &f->ui_listen}) {
    if (!addr->empty() && addr->front() == ':') *addr = "127.0.0.1" + *addr;
  }
  std::string listen_host, ui_host;
  for (const auto& [flag, value] : {std::make_pair("--listen", f->listen),
                                    std::make_pair("--metrics-listen", f->metrics_listen),
                                    std::make_pair("--health-listen", f->health_listen),
                                    std::make_pair("--ui-listen", f->ui_listen)}) {
    if (value.empty()) continue;
    auto hp = ParseHostPort(value, flag);
    check(hp.status());
    if (hp.ok() && std::string(flag) == "--listen") listen_host = hp->first;
    if (hp.ok() && std::string(flag) == "--ui-listen") ui_host = hp->first;
  }
  if (f->insecure) {
    if (!listen_host.empty() && !IsLoopbackHost(listen_host)) {
      problems.push_back(Status::InvalidArgument(
          "--insecure serves plain text without authentication: --listen must be a loopback "
          "address (127.0.0.1, ::1, localhost), not '" +
          listen_host + "'; drop --insecure to serve TLS"));
    }
    if (!ui_host.empty() && !IsLoopbackHost(ui_host)) {
      problems.push_back(Status::InvalidArgument(
          "--insecure serves the web UI in plain HTTP without login: --ui-listen must be a "
          "loopback address (127.0.0.1, ::1, localhost), not '" +
          ui_host + "'; drop --insecure to serve HTTPS"));
    }
    if (!f->tls_cert.empty() || !f->tls_key.empty() || !f->tls_ca.empty()) {
      problems.push_back(
          Status::InvalidArgument("--insecure and --tls-cert/--tls-key/--tls-ca conflict"));
    }
  }
  const int own = !f->tls_cert.empty() + !f->tls_key.empty() + !f->tls_ca.empty();
  if (own != 0 && own != 3) {
    problems.push_back(Status::InvalidArgument("--tls-cert, --tls-key and --tls-ca go together"));
  }
  auto ttl = ParseDuration(f->worker_cert_ttl, "--worker-cert-ttl");
  check(ttl.status());
  if (ttl.ok() && *ttl < 300) {
    problems.push_back(Status::InvalidArgument("--worker-cert-ttl: at least 5m"));
  } else if (ttl.ok()) {
    f->worker_cert_ttl_s = *ttl;
  }
  check(ParseJobRetention(f->job_retention, &f->job_retention_ms, &f->job_retention_count));
  if (f->store != "sqlite") {
    check(ParseEtcdUrl("--store", f->store).status());
    if (f->etcd_prefix.size() < 2 || f->etcd_prefix.front() != '/' ||
        f->etcd_prefix.back() != '/') {
      problems.push_back(Status::InvalidArgument("--etcd-prefix: '" + f->etcd_prefix +
                                                 "' must start and end with '/' (/convoy/)"));
    }
  } else {
    if (!f->etcd_ca.empty() || !f->etcd_cert.empty() || !f->etcd_key.empty()) {
      problems.push_back(
          Status::InvalidArgument("--etcd-ca/--etcd-cert/--etcd-key need --store etcd://..."));
    }
    // A coordinator on SQLite elects no leader: the lease would be silently ignored.
    if (lease_given) {
      problems.push_back(Status::InvalidArgument("--leader-lease needs --store etcd://..."));
    }
  }
  return problems;
}

}  // namespace

Status ParseCoordinatorFlags(int argc, char** argv, CoordinatorFlags* f, int* exit_code,
                             ConfigCheck* check) {
  const bool checking = check != nullptr && WantsCheckConfig(argc, argv);
  if (checking) {
    check->enabled = true;
    check->try_item = [](const CLI::ConfigItem& item) {
      CoordinatorFlags scratch;
      Subcommands subs;
      CLI::App probe;
      DefineOptions(probe, &scratch, &subs, nullptr);
      return TryConfigItem(&probe, item);
    };
  }
  CLI::App app{"convoy-coordinator: schedules and supervises distributed training jobs"};
  Subcommands subs;
  DefineOptions(app, f, &subs, checking ? check : nullptr);
  bool recorded = false;
  if (Status s = ParseDaemonFlags(app, argc, argv, check, exit_code, &recorded); !s.ok()) {
    return s;
  }
  if (recorded) return Status::Ok();  // --check-config reports it with the others
  if (subs.init->parsed()) f->command = "init";
  if (subs.create->parsed()) f->command = "token create";
  if (subs.list->parsed()) f->command = "token list";
  if (subs.revoke->parsed()) f->command = "token revoke";
  for (const Subcommands::Copy& c : subs.store_copies) {
    if (c.option->count() > 0) *c.to = *c.value;
  }
  for (const CLI::Option* o : subs.state_dir_options) {
    if (o->count() > 0) f->state_dir = subs.state_dir;
  }
  if (subs.listen_option->count() > 0) f->listen = subs.listen;
  if (subs.advertise_option->count() > 0) f->advertise_address = subs.advertise_address;
  if (subs.san_option->count() > 0) f->tls_sans = subs.tls_sans;
  const bool lease_given = app.get_option("--leader-lease")->count() > 0;
  return FinishDaemonFlags(
      check, [f, lease_given] { return ValidateFlags(f, lease_given); }, exit_code);
}

}  // namespace convoy

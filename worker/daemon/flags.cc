#include "worker/daemon/flags.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/config_file.h"
#include "common/util.h"
#include "common/version.h"
#include "worker/host/resources.h"

namespace convoy {

namespace {

// The options of the connection, the ranks' processes and the daemon's own (the second half
// of DefineOptions, in --help's order).
void DefineRunOptions(CLI::App& app, WorkerFlags* f) {
  app.add_flag("--insecure", f->insecure,
               "plain-text gRPC without authentication (a coordinator on loopback only)");
  app.add_option("--join-token", f->join_token,
                 "join token (convoy-coordinator token create "
                 "--role worker)")
      ->envname("CONVOY_JOIN_TOKEN");
  app.add_option("--join-token-file", f->join_token_file,
                 "a file holding the join token (never on the command line, which every local "
                 "user can read in /proc)")
      ->envname("CONVOY_JOIN_TOKEN_FILE");
  app.add_option("--ca-fingerprint", f->ca_fingerprint,
                 "SHA256:... of the cluster CA (printed by convoy-coordinator init)")
      ->envname("CONVOY_CA_FINGERPRINT");
  app.add_option("--tls-cert", f->tls_cert, "your own client certificate (PEM; its name = --name)");
  app.add_option("--tls-key", f->tls_key, "its private key (PEM)");
  app.add_option("--tls-ca", f->tls_ca, "the CA that signed the coordinator's certificate");
  app.add_option("--trainer", f->trainer, "path of convoy-trainer");
  app.add_option("--warm-trainers", f->warm_trainers,
                 "pre-loaded convoy-trainer processes that fork ranks (0: every rank starts cold)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--warm-python", f->warm_python,
                 "Python interpreter (path or name in PATH) of a forkserver that has imported "
                 "torch and forks the ranks of command: jobs running a script or -m module "
                 "with it (default: off)");
  app.add_option("--rank-huge-pages", f->rank_huge_pages,
                 "the ranks' malloc backs its heap with transparent huge pages "
                 "(GLIBC_TUNABLES=glibc.malloc.hugetlb=1): far fewer page faults while a fresh "
                 "rank loads its state and takes its first steps")
      ->capture_default_str();
  app.add_option("--orphan-timeout", f->orphan_timeout_s,
                 "seconds without a coordinator before ranks are stopped")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--kill-grace-ms", f->kill_grace_ms, "SIGTERM to SIGKILL grace")
      ->check(CLI::Range(0, 600000))
      ->capture_default_str();
  app.add_option("--log-max-bytes", f->log_max_bytes, "per-rank log size before rotation")
      ->check(CLI::Range(int64_t{4096}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--attempt-dir-retention", f->attempt_dir_retention_s,
                 "remove a finished attempt's directory (rank logs) this long after it ended "
                 "(90s, 12h, 7d; 0: keep it until the job is deleted)")
      ->transform(CLI::AsNumberWithUnit(
          std::map<std::string, double>{{"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}}))
      ->check(CLI::Range(0.0, 3650 * 86400.0))
      ->default_str("7d");
  app.add_option("--health-check", f->health_check,
                 "the operator's health check, run with /bin/sh -c at start and every "
                 "--health-check-interval: a non-zero exit or a timeout makes the worker "
                 "unhealthy (no new ranks) with its first lines as the reason");
  app.add_option("--health-check-interval", f->health_check_interval_s,
                 "seconds between health checks (built-in and --health-check)")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--health-check-timeout", f->health_check_timeout_s,
                 "seconds --health-check may run before it counts as failed")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_option("--health-min-free", f->health_min_free,
                 "free space the work dir, job root and snapshot dir must keep for the worker "
                 "to be healthy: 1Gi, 512Mi or bytes (0: not checked)")
      ->capture_default_str();
  app.add_option("--metrics-listen", f->metrics_listen,
                 "HOST:PORT of /metrics, /healthz and /readyz (:PORT binds loopback)");
  app.add_option("--log-level", f->log_level, "trace|debug|info|warn|error|critical|off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
}

// Every option of convoy-worker, bound to `f`.
void DefineOptions(CLI::App& app, WorkerFlags* f, ConfigCheck* check) {
  app.set_version_flag("--version", VersionLine("convoy-worker"));
  AddConfigFileOptions(&app, check);
  app.add_flag("--check-config", f->check_config,
               "validate the whole configuration (addresses, directories, the run-as user, "
               "TLS files, credentials) and exit 0 (\"configuration OK\"), or 1 with one "
               "\"configuration error:\" line per problem; starts nothing")
      ->configurable(false);
  app.add_option("--coordinator", f->coordinator, "HOST:PORT of the coordinator")
      ->envname("CONVOY_COORDINATOR");
  app.add_option("--name", f->name, "unique worker name, e.g. the host's")
      ->envname("CONVOY_WORKER_NAME")
      ->required();
  app.add_option("--advertise-address", f->advertise_address,
                 "address other nodes reach this machine at (MASTER_ADDR of node 0)")
      ->envname("CONVOY_ADVERTISE_ADDRESS");
  app.add_option("--slots", f->slots, "processes this worker may run at once")
      ->check(CLI::Range(1, 4096));
  app.add_option("--cores", f->cores, "CPU cores this worker may use (default: all online)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--memory", f->memory,
                 "memory this worker offers: 64Gi, 512Mi, 2G or bytes (default: MemTotal, or "
                 "the cgroup's memory.max when smaller)");
  app.add_option("--gpus", f->gpus,
                 "GPU indices this worker offers, e.g. 0,1, or none (default: every GPU found, "
                 "or CUDA_VISIBLE_DEVICES)");
  app.add_option("--label", f->labels,
                 "KEY=VALUE label matched by a job's node_selector, e.g. zone=a (repeatable)")
      ->take_all();
  app.add_option("--work-dir", f->work_dir, "directory for logs, sockets, checkpoints")->required();
  app.add_option("--run-as", f->run_as,
                 "who the ranks run as when the worker is root: pool (a uid and gid of its own "
                 "per job, from --run-as-pool), owner (each job as the Unix account named as "
                 "its owner; never root) or USER (every job as that one user: jobs are not "
                 "isolated from each other)")
      ->capture_default_str();
  app.add_option("--run-as-pool", f->run_as_pool,
                 "FIRST-LAST: the uids and gids --run-as pool gives jobs (no account or group "
                 "may use them)")
      ->capture_default_str();
  app.add_flag("--allow-root-jobs", f->allow_root_jobs, "let --run-as name root (uid 0)");
  app.add_option("--job-root", f->job_root,
                 "directory of the jobs' own directories (default WORK_DIR/job-root)");
  app.add_option("--cgroups", f->cgroups,
                 "enforced limits: auto (each rank in a cgroup of its own with its job's "
                 "memory_per_proc, cpus_per_proc and --pids-per-rank, when the host has a usable "
                 "hierarchy), required (refuse to start without one) or off; without cgroups, "
                 "jobs that set limits are refused")
      ->check(CLI::IsMember({"auto", "required", "off"}))
      ->capture_default_str();
  app.add_option("--pids-per-rank", f->pids_per_rank,
                 "processes and threads one rank may have at once (its cgroup's pids.max; 0: "
                 "no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--snapshot-dir", f->snapshot_dir,
                 "host memory for the ranks' snapshots (default /dev/shm/convoy-NAME; none: off)");
  app.add_option("--data-path", f->data_paths,
                 "read-only root a job's trainer.data_dir may name (repeatable)")
      ->take_all()
      ->capture_default_str();
  app.add_option("--prefill-data", f->prefill_data,
                 "a data directory under a --data-path whose data set the worker decompresses "
                 "into its data cache at start, before any job asks (repeatable; none: only "
                 "when a job first reads one)")
      ->take_all()
      ->capture_default_str();
  app.add_option("--shared-path", f->shared_paths,
                 "a directory a job's checkpoint_dir or working_dir may name besides its own "
                 "directory, shared between jobs (repeatable; none by default)");
  app.add_option("--pass-env", f->pass_env,
                 "another worker variable the ranks may see, NAME or PREFIX* (repeatable)")
      ->take_all();
  DefineRunOptions(app, f);
}

// The checks after the parse, every one of them (--check-config reports them all; a start
// refuses at the first). Fills the parsed forms (memory_bytes, label_map, metrics_listen).
std::vector<Status> ValidateFlags(WorkerFlags* f) {
  std::vector<Status> problems;
  auto check = [&](const Status& s) {
    if (!s.ok()) problems.push_back(s);
  };
  std::string coordinator_host;
  if (f->coordinator.empty()) {
    problems.push_back(
        Status::InvalidArgument("--coordinator (or CONVOY_COORDINATOR) is required"));
  } else {
    auto host = CheckCoordinators(f->coordinator, "--coordinator");
    check(host.status());
    if (host.ok()) coordinator_host = *host;
  }
  if (!f->metrics_listen.empty() && f->metrics_listen.front() == ':') {
    f->metrics_listen = "127.0.0.1" + f->metrics_listen;
  }
  if (!f->metrics_listen.empty())
    check(ParseHostPort(f->metrics_listen, "--metrics-listen").status());
  if (!f->memory.empty()) {
    auto bytes = ParseByteSize(f->memory, "--memory");
    check(bytes.status());
    if (bytes.ok()) f->memory_bytes = *bytes;
  }
  {
    auto bytes = ParseByteSize(f->health_min_free, "--health-min-free");
    check(bytes.status());
    if (bytes.ok()) f->health_min_free_bytes = *bytes;
  }
  if (!f->gpus.empty()) check(ParseGpuList(f->gpus).status());
  auto labels = ParseLabels(f->labels);
  check(labels.status());
  if (labels.ok()) f->label_map = *labels;
  if (!IsValidName(f->name)) {
    problems.push_back(Status::InvalidArgument("--name: '" + f->name +
                                               "' is not valid: use 1-63 of [A-Za-z0-9._-]"));
  }
  if (!f->join_token_file.empty()) {
    if (!f->join_token.empty()) {
      problems.push_back(Status::InvalidArgument(
          "--join-token-file conflicts with --join-token (CONVOY_JOIN_TOKEN): give one"));
    } else {
      std::ifstream in(f->join_token_file);
      std::string token;
      std::getline(in, token);
      while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
        token.pop_back();
      }
      if (!in.is_open()) {
        problems.push_back(Status::InvalidArgument("--join-token-file " + f->join_token_file +
                                                   ": cannot be read"));
      } else if (token.empty()) {
        problems.push_back(
            Status::InvalidArgument("--join-token-file " + f->join_token_file + ": is empty"));
      } else {
        f->join_token = token;
      }
    }
  }
  if (f->insecure) {
    if (!coordinator_host.empty() && !IsLoopbackHost(coordinator_host)) {
      problems.push_back(Status::InvalidArgument(
          "--insecure sends plain text without authentication: only to a coordinator on "
          "loopback, not '" +
          coordinator_host + "'; join with --join-token and --ca-fingerprint instead"));
    }
    if (!f->join_token.empty() || !f->tls_cert.empty()) {
      problems.push_back(
          Status::InvalidArgument("--insecure conflicts with --join-token and --tls-cert"));
    }
  }
  const int own = !f->tls_cert.empty() + !f->tls_key.empty() + !f->tls_ca.empty();
  if (own != 0 && own != 3) {
    problems.push_back(Status::InvalidArgument("--tls-cert, --tls-key and --tls-ca go together"));
  }
  if (!f->join_token.empty() && f->ca_fingerprint.empty()) {
    problems.push_back(Status::InvalidArgument(
        "--join-token needs --ca-fingerprint (printed by convoy-coordinator init): the worker "
        "trusts the coordinator only once its CA matches"));
  }
  if (!f->ca_fingerprint.empty()) check(CheckCaFingerprint("--ca-fingerprint", f->ca_fingerprint));
  return problems;
}

}  // namespace

Status CheckCaFingerprint(const std::string& flag, const std::string& value) {
  const bool prefixed = value.rfind("SHA256:", 0) == 0 || value.rfind("sha256:", 0) == 0;
  size_t hex = 0;
  bool only_hex = true;
  for (size_t i = prefixed ? 7 : 0; i < value.size(); ++i) {
    if (value[i] == ':') continue;
    if (std::isxdigit(static_cast<unsigned char>(value[i])) == 0) only_hex = false;
    ++hex;
  }
  if (prefixed && only_hex && hex == 64) return Status::Ok();
  return Status::InvalidArgument(
      flag + ": '" + value +
      "' is not a CA fingerprint: expected SHA256: and 64 hex digits (colons between them "
      "allowed), as `convoy-coordinator init` prints it" +
      (prefixed && only_hex ? ", got " + std::to_string(hex) + " digits" : ""));
}

Status ParseWorkerFlags(int argc, char** argv, WorkerFlags* f, int* exit_code, ConfigCheck* check) {
  const bool checking = check != nullptr && WantsCheckConfig(argc, argv);
  if (checking) {
    check->enabled = true;
    check->try_item = [](const CLI::ConfigItem& item) {
      WorkerFlags scratch;
      CLI::App probe;
      DefineOptions(probe, &scratch, nullptr);
      return TryConfigItem(&probe, item);
    };
  }
  CLI::App app{"convoy-worker: runs the training processes of Convoy jobs on this machine"};
  DefineOptions(app, f, checking ? check : nullptr);
  bool recorded = false;
  if (Status s = ParseDaemonFlags(app, argc, argv, check, exit_code, &recorded); !s.ok()) {
    return s;
  }
  if (recorded) return Status::Ok();  // --check-config reports it with the others
  return FinishDaemonFlags(
      check, [f] { return ValidateFlags(f); }, exit_code);
}

}  // namespace convoy

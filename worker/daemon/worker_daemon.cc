#include "worker/daemon/worker_daemon.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "common/job_paths.h"
#include "common/pki.h"
#include "common/rank_contract.h"
#include "worker/daemon/metrics_http.h"
#include "worker/daemon/worker_metrics.h"
#include "worker/exec/posix_process_launcher.h"
#include "worker/exec/rank_env.h"
#include "worker/exec/warm_trainer.h"
#include "worker/files/attempt_dir_retention.h"
#include "worker/files/data_cache.h"
#include "worker/files/job_root.h"
#include "worker/files/snapshot_dir.h"
#include "worker/host/health.h"
#include "worker/host/job_identity.h"
#include "worker/host/nvml.h"
#include "worker/host/resources.h"
#include "worker/link/code_fetch.h"
#include "worker/link/coordinator_connection.h"
#include "worker/link/credentials.h"
#include "worker/link/report_queue.h"
#include "worker/supervise/supervisor.h"

namespace convoy {
namespace {

// A configuration that cannot run: convoy-worker exits 2.
Status Refused(const std::string& message) { return Status::InvalidArgument(message); }

}  // namespace

WorkerDaemon::WorkerDaemon() : config_(std::make_unique<WorkerConfig>()) {}

WorkerDaemon::~WorkerDaemon() {
  Stop();
  // Members go in the reverse of their order: the retention, /metrics, the supervisor, the
  // launchers, then the cgroups (remove_cgroups_), the stream and the credentials.
}

StatusOr<std::unique_ptr<WorkerDaemon>> WorkerDaemon::Create(const WorkerFlags& flags, Deps deps) {
  std::unique_ptr<WorkerDaemon> d(new WorkerDaemon());
  if (deps.clock != nullptr) d->clock_ = deps.clock;
  d->coordinator_ = flags.coordinator;
  std::unique_ptr<Nvml> nvml;
  CONVOY_RETURN_IF_ERROR(d->ResolveMachine(flags, &nvml));
  auto ranks_user = d->ResolveUsers(flags);
  if (!ranks_user.ok()) return ranks_user.status();
  CONVOY_RETURN_IF_ERROR(d->ResolveDirectories(flags, *ranks_user));

  CredentialOptions cred_options;
  cred_options.coordinator = flags.coordinator;
  cred_options.name = flags.name;
  cred_options.work_dir = d->config_->work_dir;
  cred_options.insecure = flags.insecure;
  cred_options.join_token = flags.join_token;
  cred_options.ca_fingerprint = flags.ca_fingerprint;
  cred_options.tls_cert = flags.tls_cert;
  cred_options.tls_key = flags.tls_key;
  cred_options.tls_ca = flags.tls_ca;
  auto credentials = WorkerCredentials::Create(cred_options, *d->clock_);
  if (!credentials.ok()) return credentials.status();
  d->credentials_ = std::move(*credentials);
  d->credentials_->StartRenewal();
  d->reports_ = std::make_unique<ReportQueue>();
  // Opened after everything that may refuse to start (the credentials above), so that a
  // worker that does not start leaves no group behind.
  CONVOY_RETURN_IF_ERROR(d->OpenCgroups(flags));
  ProcessLauncher* launcher = d->StartLaunchers(flags);
  if (deps.tune_config) deps.tune_config(d->config_.get());
  d->supervisor_ = std::make_unique<Supervisor>(*d->config_, *launcher, *d->reports_, *d->clock_);
  d->connection_ = std::make_unique<CoordinatorConnection>(
      flags.coordinator, flags.insecure ? nullptr : d->credentials_.get(), *d->reports_,
      *d->supervisor_, d->config_->work_dir);
  CONVOY_RETURN_IF_ERROR(d->StartHttp(flags, std::move(nvml)));
  d->StartHealth(flags);
  d->supervisor_->Start();
  d->supervising_ = true;
  d->StartRetention(flags);
  return d;
}

Status WorkerDaemon::ResolveMachine(const WorkerFlags& flags, std::unique_ptr<Nvml>* nvml) {
  WorkerConfig& config = *config_;
  config.name = flags.name;
  config.address =
      flags.advertise_address.empty() ? FirstNonLoopbackIpv4() : flags.advertise_address;
  config.hostname = HostName();
  // Missing directories are made 0711 (PrepareRoot): ranks of another user pass through
  // them to their metrics sockets and job directories; the worker makes its own 0700/0711.
  auto work_dir = PrepareRoot("--work-dir", flags.work_dir);
  if (!work_dir.ok()) return Refused(work_dir.status().message());
  config.work_dir = *work_dir;
  // Code archives idle past their hour, and fetches that died with the last worker.
  if (const int gone = CollectCodeCache(config.work_dir, kCodeCacheIdleS, true); gone > 0) {
    spdlog::info("removed {} idle code archive(s) from {}/code", gone, config.work_dir);
  }
  config.trainer_path = flags.trainer.empty() ? SelfDirectory() + "/convoy-trainer" : flags.trainer;
  // What this machine offers (issue 16): cores, memory, GPUs (NVML, else the driver's /proc
  // files, else /dev/nvidia<N>), and the operator's labels.
  config.cores = flags.cores > 0 ? flags.cores : UsableCores();
  config.memory_bytes = flags.memory_bytes > 0 ? flags.memory_bytes : UsableMemoryBytes();
  *nvml = Nvml::Load();
  GpuSources gpu_sources;
  if (!flags.gpus.empty()) gpu_sources.gpus_flag = flags.gpus;
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) gpu_sources.cuda_visible_devices = cvd;
  if (*nvml) gpu_sources.nvml = (*nvml)->Devices();
  auto offered = DiscoverGpus(gpu_sources);
  if (!offered.ok()) return Refused(offered.status().message());
  config.gpu_devices = offered->devices;
  for (const GpuDeviceInfo& g : config.gpu_devices) config.gpus.push_back(g.index);
  config.labels = flags.label_map;
  config.slots = flags.slots > 0
                     ? flags.slots
                     : (config.gpus.empty() ? config.cores : static_cast<int>(config.gpus.size()));
  std::string labels;
  for (const auto& [k, v] : config.labels) labels += (labels.empty() ? "" : ", ") + k + "=" + v;
  spdlog::info("resources: {} cores{}, {} memory{}, {} GPU(s) from {}; labels: {}", config.cores,
               flags.cores > 0 ? " (--cores)" : "",
               config.memory_bytes > 0 ? HumanBytes(config.memory_bytes) : "unknown",
               flags.memory_bytes > 0 ? " (--memory)" : "", config.gpu_devices.size(),
               offered->source, labels.empty() ? "none" : labels);
  for (const GpuDeviceInfo& g : config.gpu_devices) {
    spdlog::info("GPU {}: {}, {}, {}", g.index, g.model.empty() ? "model unknown" : g.model,
                 g.memory_bytes > 0 ? HumanBytes(g.memory_bytes) : "memory unknown",
                 g.uuid.empty() ? "UUID unknown" : g.uuid);
  }
  config.kill_grace_ms = flags.kill_grace_ms;
  config.orphan_timeout_ms = static_cast<int64_t>(flags.orphan_timeout_s * 1000);
  config.log_max_bytes = flags.log_max_bytes;
  config.env = AllowedWorkerEnvironment(ProcessEnvironment(), flags.pass_env);
  if (flags.rank_huge_pages) config.env = WithMallocHugePages(std::move(config.env));
  return Status::Ok();
}

StatusOr<std::optional<RunAsUser>> WorkerDaemon::ResolveUsers(const WorkerFlags& flags) {
  WorkerConfig& config = *config_;
  // Jobs never run as root because the worker does (issue 12): refuse to start instead.
  auto rank_user = flags.run_as == "pool" || flags.run_as == "owner"
                       ? StatusOr<std::optional<RunAsUser>>(std::optional<RunAsUser>())
                       : ResolveRankUser(flags.run_as, flags.allow_root_jobs, geteuid());
  if (!rank_user.ok()) return Refused(rank_user.status().message());
  config.run_as = *rank_user;
  // --run-as pool on a root worker: an identity of its own per job (issue 27). The checks
  // that follow judge what "a job identity" (another user, of the pool) can reach.
  std::optional<RunAsUser> ranks_user = config.run_as;
  if (flags.run_as == "pool" && geteuid() == 0) {
    auto pool = PrepareJobIdentities(flags.run_as_pool, config.work_dir);
    if (!pool.ok()) return Refused(pool.status().message());
    config.identities = std::move(*pool);
    config.run_as.reset();
    ranks_user = PoolRepresentative(config.identities->range());
  } else if (flags.run_as == "owner" && geteuid() == 0) {
    // Each job as its owner's account (a site that maps Convoy users to Unix accounts).
    config.run_as_owner = true;
    ranks_user = OwnerRepresentative();
  }
  return ranks_user;
}

Status WorkerDaemon::ResolveDirectories(const WorkerFlags& flags,
                                        const std::optional<RunAsUser>& ranks_user) {
  WorkerConfig& config = *config_;
  if (flags.snapshot_dir != "none") {
    config.snapshot_root =
        flags.snapshot_dir.empty()
            ? DefaultSnapshotRoot(flags.name, config.work_dir)
            : std::filesystem::absolute(flags.snapshot_dir).lexically_normal().string();
  }
  // Job directories apart from the worker's own, and reachable by the ranks: a job whose
  // ranks cannot enter their directory fails every attempt at once, so refuse to start.
  auto job_root = StartupJobRoot(flags.job_root, config.work_dir, config.snapshot_root, ranks_user);
  if (!job_root.ok()) return Refused(job_root.status().message());
  config.job_root = *job_root;
  if (!config.snapshot_root.empty()) {
    spdlog::info("snapshots of the ranks in {}", config.snapshot_root);
  }
  for (const std::string& p : flags.data_paths) {
    auto root = CanonicalPath(p);
    if (root.ok()) config.data_paths.push_back(*root);
  }
  // Decompressed data sets, written by the worker alone and read by every rank
  // (worker/files/data_cache.h): from the read-only roots jobs cannot write.
  std::vector<std::string> roots = config.data_paths;
  auto default_dir = CanonicalPath(rank_contract::kDefaultDataDir);
  if (default_dir.ok()) roots.push_back(*default_dir);
  auto cache = WorkerDataCache::Open(config.work_dir, std::move(roots));
  if (cache.ok()) {
    config.data_cache = std::move(*cache);
    int queued = 0;
    for (const std::string& dir : flags.prefill_data) {
      if (dir != "none") queued += config.data_cache->Ensure(dir);
    }
    spdlog::info("data cache {}: {} file(s) of --prefill-data to decompress",
                 config.data_cache->dir(), queued);
  } else {
    spdlog::warn("no data cache for the ranks: {}", cache.status().message());
  }
  for (const std::string& p : flags.shared_paths) {
    auto root = CanonicalPath(p);
    if (!root.ok()) return Refused("--shared-path " + root.status().message());
    config.shared_paths.push_back(*root);
  }
  return Status::Ok();
}

Status WorkerDaemon::OpenCgroups(const WorkerFlags& flags) {
  WorkerConfig& config = *config_;
  // Enforced limits (issue 27): each rank in a cgroup of its own under the worker's, named by
  // its work dir too, so that two workers of one name on a host (two clusters) never share
  // one; a restarted worker finds its predecessor's groups there and removes them.
  if (flags.cgroups == "off") {
    config.cgroups_missing = "--cgroups off";
  } else {
    const std::string base = "convoy-" + flags.name + "-" + Sha256Hex(config.work_dir).substr(0, 8);
    auto opened = Cgroups::OpenSystem(base);
    if (opened.ok()) {
      config.cgroups = std::move(*opened);
      // Removed when the daemon goes (a clean stop, a failed start alike).
      WorkerConfig* held = config_.get();
      remove_cgroups_ = std::shared_ptr<void>(nullptr, [held](void*) {
        Status st = held->cgroups->RemoveBase();
        if (!st.ok()) spdlog::warn("the worker's cgroups stay: {}", st.message());
      });
      config.pids_per_rank = flags.pids_per_rank;
      spdlog::info("limits enforced: each rank in a cgroup of its own: {}",
                   config.cgroups->Describe());
      for (const std::string& left : config.cgroups->Leftovers()) {
        Status st = config.cgroups->RemoveLeftover(left);
        if (st.ok()) {
          spdlog::info("removed cgroup {} of an earlier worker process, and what ran in it", left);
        } else {
          spdlog::warn("cgroup {} of an earlier worker process stays: {}", left, st.message());
        }
      }
    } else if (flags.cgroups == "required") {
      return Refused("--cgroups required: " + opened.status().message());
    } else {
      config.cgroups_missing = opened.status().message();
    }
  }
  if (config.cgroups == nullptr) {
    spdlog::warn(
        "limits are not enforced ({}): a rank can take any memory and cores of this host, and "
        "jobs that set memory_per_proc or cpus_per_proc are refused",
        config.cgroups_missing);
  }
  return Status::Ok();
}

ProcessLauncher* WorkerDaemon::StartLaunchers(const WorkerFlags& flags) {
  const WorkerConfig& config = *config_;
  cold_launcher_ = std::make_unique<PosixProcessLauncher>();
  // Ranks of built-in-trainer jobs fork from a pre-loaded trainer (issue 17).
  warm_launcher_ =
      std::make_unique<WarmTrainerLauncher>(*cold_launcher_, config.trainer_path, config.env);
  bool warm = flags.warm_trainers > 0 && warm_launcher_->Start();
  // Ranks of command: jobs that run a Python script fork from a warm Python (--warm-python).
  if (!flags.warm_python.empty()) {
    auto path = config.env.find("PATH");
    const std::string python =
        ResolveProgram(flags.warm_python, path == config.env.end() ? "" : path->second);
    const std::string script = FindForkserverScript(SelfDirectory());
    if (python.empty()) {
      spdlog::warn("--warm-python {}: not found in the worker's PATH; Python ranks start cold",
                   flags.warm_python);
    } else if (script.empty()) {
      spdlog::warn(
          "--warm-python: convoy-forkserver.py is neither next to convoy-worker nor in "
          "../lib/convoy; Python ranks start cold");
    } else {
      warm = warm_launcher_->StartPython(
                 python[0] == '/' ? python : std::filesystem::absolute(python).string(), script) ||
             warm;
    }
  }
  if (warm) return warm_launcher_.get();
  return cold_launcher_.get();
}

Status WorkerDaemon::StartHttp(const WorkerFlags& flags, std::unique_ptr<Nvml> nvml) {
  if (flags.metrics_listen.empty()) return Status::Ok();
  if (nvml) spdlog::info("NVML loaded: /metrics reports GPU utilisation and memory");
  Supervisor* supervisor = supervisor_.get();
  auto metrics = std::make_shared<WorkerMetrics>(
      config_->name, config_->slots, [supervisor] { return supervisor->RankSamples(); },
      [supervisor] { return supervisor->counters(); }, std::move(nvml));
  CoordinatorConnection* connection = connection_.get();
  auto started = MetricsHttpServer::Start(flags.metrics_listen, {metrics},
                                          [connection] { return connection->registered(); });
  if (!started.ok()) return Status::Unavailable(started.status().message());
  http_ = std::move(*started);
  spdlog::info("serving /metrics, /healthz, /readyz on {}", flags.metrics_listen);
  return Status::Ok();
}

void WorkerDaemon::StartRetention(const WorkerFlags& flags) {
  // --attempt-dir-retention: finished attempts' directories go after a while; a sweep every
  // tenth of the retention (at most hourly) is early enough.
  if (flags.attempt_dir_retention_s <= 0) return;
  Supervisor* supervisor = supervisor_.get();
  const auto retention_ms = static_cast<int64_t>(flags.attempt_dir_retention_s * 1000);
  retention_ =
      std::make_unique<AttemptDirRetention>(config_->work_dir, retention_ms, *clock_, [supervisor] {
        std::set<std::pair<std::string, int>> running;
        for (const Supervisor::RankSample& r : supervisor->RankSamples()) {
          if (r.running) running.insert({r.job_id, r.attempt});
        }
        return running;
      });
  retention_->Start(std::clamp<int64_t>(retention_ms / 10, 1000, 3600 * 1000));
}

void WorkerDaemon::StartHealth(const WorkerFlags& flags) {
  const WorkerConfig& config = *config_;
  HealthOptions o;
  if (flags.health_min_free_bytes > 0) {
    o.disks = {{"disk:work-dir", config.work_dir}, {"disk:job-root", config.job_root}};
    if (!config.snapshot_root.empty())
      o.disks.push_back({"disk:snapshot-dir", config.snapshot_root});
  }
  o.min_free_bytes = flags.health_min_free_bytes;
  o.program = flags.health_check;
  o.program_timeout_ms = static_cast<int64_t>(flags.health_check_timeout_s * 1000);
  o.interval_ms = static_cast<int64_t>(flags.health_check_interval_s * 1000);
  if (!config.gpus.empty()) {
    health_nvml_ = Nvml::Load();
    std::string indices;
    for (int g : config.gpus) indices += (indices.empty() ? "" : ",") + std::to_string(g);
    // /bin/sh -c: the path single-quoted (a quote in it closed, escaped and reopened). The
    // indices are the machine's, as CUDA numbers them without CUDA_VISIBLE_DEVICES.
    std::string quoted = "'";
    for (char ch : config.trainer_path) {
      quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    }
    o.device_program = "env -u CUDA_VISIBLE_DEVICES " + quoted + "' --check-devices " + indices;
  }
  Supervisor* supervisor = supervisor_.get();
  health_ = std::make_unique<HealthMonitor>(
      std::move(o), health_nvml_.get(), *clock_, [supervisor](const HealthReport& r) {
        if (r.state == HealthReport::State::kFailing) {
          spdlog::warn("health check failed: no new ranks until it passes: {}", r.reason);
        } else {
          spdlog::info("health: {} ({} check(s))", DescribeHealth(r), r.checks.size());
        }
        supervisor->HealthChanged();
      });
  supervisor_->UseHealth(health_.get());
  spdlog::info("health checks every {} s: free space{}{}{}", flags.health_check_interval_s,
               flags.health_min_free_bytes > 0 ? " (" + flags.health_min_free + ")" : " off",
               ", /dev/shm",
               config.gpus.empty() ? "" : ", GPU ECC (NVML) and a kernel on each GPU");
  if (!flags.health_check.empty()) {
    spdlog::info("health check program: {} (timeout {} s)", flags.health_check,
                 flags.health_check_timeout_s);
  }
}

int WorkerDaemon::metrics_port() const { return http_ != nullptr ? http_->port() : 0; }

void WorkerDaemon::Start() {
  const WorkerConfig& config = *config_;
  spdlog::info(
      "convoy-worker {} '{}' at {}: {} cores, {} GPUs, {} slots, work dir {}; "
      "coordinator {}",
      CONVOY_VERSION, config.name, config.address, config.cores, config.gpus.size(), config.slots,
      config.work_dir, coordinator_);
  CoordinatorConnection* connection = connection_.get();
  connection_thread_ = std::thread([connection] { connection->Run(); });
}

void WorkerDaemon::Stop() {
  if (stopped_) return;
  stopped_ = true;
  http_.reset();  // probes fail from here on
  if (retention_) retention_->Stop();
  if (supervising_) supervisor_->Stop();  // reports the exits while the stream is still up
  health_.reset();                        // after the supervisor: its last heartbeats read it
  if (connection_) connection_->Shutdown();
  if (connection_thread_.joinable()) connection_thread_.join();
}

}  // namespace convoy

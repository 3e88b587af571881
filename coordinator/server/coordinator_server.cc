#include "coordinator/server/coordinator_server.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/pki.h"
#include "common/util.h"
#include "coordinator/rpc/health_server.h"
#include "coordinator/rpc/metrics_exporter.h"
#include "coordinator/sched/priority_scheduler.h"
#include "coordinator/sched/scheduler.h"
#include "coordinator/store/cluster_id.h"
#include "coordinator/store/code_store.h"
#include "coordinator/store/etcd_client.h"
#include "coordinator/store/etcd_code_replica.h"
#include "coordinator/store/etcd_job_store.h"
#include "coordinator/store/etcd_token_backend.h"
#include "coordinator/store/leader_election.h"
#include "coordinator/store/sqlite_job_store.h"
#include "coordinator/store/token_store.h"
#include "coordinator/web/ui_server.h"

namespace convoy {

StatusOr<EtcdOptions> EtcdOptionsFromFlags(const CoordinatorFlags& flags) {
  auto endpoints = ParseEtcdUrl("--store", flags.store);
  if (!endpoints.ok()) return endpoints.status();
  EtcdOptions options;
  options.endpoints = *endpoints;
  options.ca_file = flags.etcd_ca;
  options.cert_file = flags.etcd_cert;
  options.key_file = flags.etcd_key;
  return options;
}

StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Create(
    const CoordinatorFlags& flags, Deps deps) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  if (Status s = server->Build(flags, std::move(deps)); !s.ok()) return s;
  return server;
}

Status CoordinatorServer::Build(const CoordinatorFlags& flags, Deps deps) {
  std::error_code ec;
  std::filesystem::create_directories(flags.state_dir, ec);
  if (ec) return Status::Internal("--state-dir " + flags.state_dir + ": " + ec.message());
  chmod(flags.state_dir.c_str(), 0700);  // tokens' hashes, the CA's key, every job's spec
  db_path_ = flags.state_dir + "/convoy.db";
  // First: probes see the process alive (service "") while it waits for etcd or, a follower,
  // to lead; ready ("leader") once it serves.
  if (!flags.health_listen.empty()) {
    auto health = HealthServer::Start(flags.health_listen);
    if (!health.ok()) return health.status();
    health_ = std::move(*health);
    spdlog::info("serving grpc.health.v1 in plain text on {} (service \"{}\": leading)",
                 flags.health_listen, HealthServer::kLeaderService);
  }
  if (flags.store == "sqlite") {
    bool made_cluster_id = false;
    auto cluster_id = LoadOrMakeClusterId(flags.state_dir, &made_cluster_id);
    if (!cluster_id.ok()) return cluster_id.status();
    cluster_id_ = *cluster_id;
    spdlog::info("cluster id {}{}", cluster_id_,
                 made_cluster_id ? " (made now: a new cluster)" : "");
  } else {
    CONVOY_RETURN_IF_ERROR(ConnectEtcd(flags, deps));
  }

  // Security first: a coordinator that cannot serve TLS must not start at all (a follower
  // included: it finds out now, not when it is needed).
  ServerSecurity security;
  security.insecure = flags.insecure;
  if (!flags.insecure) CONVOY_RETURN_IF_ERROR(Secure(flags, &security));
  const Clock& clock = deps.clock != nullptr ? *deps.clock : system_clock_;
  if (!flags.ui_listen.empty()) CONVOY_RETURN_IF_ERROR(StartUi(flags, clock));
  if (etcd_) CONVOY_RETURN_IF_ERROR(Lead(flags, deps));
  security.auth.max_user_priority = flags.max_user_priority;
  if (deps.tune_auth) deps.tune_auth(&security.auth);
  if (store_ == nullptr) {
    auto store = SqliteJobStore::Open(db_path_);
    if (!store.ok()) return store.status();
    store_ = std::move(*store);
  }

  auto options = OptionsFrom(flags);
  if (!options.ok()) return options.status();
  if (deps.tune_options) deps.tune_options(&*options);
  coordinator_ = std::make_unique<Coordinator>(clock, *store_, *options);

  if (!flags.metrics_listen.empty()) {
    MetricsExporter::Options metrics;
    metrics.listen = flags.metrics_listen;
    metrics.retention_ms = static_cast<int64_t>(flags.metrics_retention_s * 1000);
    try {
      exporter_ = std::make_unique<MetricsExporter>(clock, metrics);
    } catch (const std::exception& e) {
      return Status::Unavailable("--metrics-listen " + flags.metrics_listen + ": " + e.what());
    }
    spdlog::info("serving /metrics on {}", flags.metrics_listen);
    MetricsExporter* exporter = exporter_.get();
    coordinator_->pipeline().set_on_commit(
        [exporter](double seconds, size_t writes) { exporter->OnCommit(seconds, writes); });
  }
  // Once a second: the exporter's series, and the web UI's list pages' changes.
  if (exporter_ || ui_feed_) {
    MetricsExporter* exporter = exporter_.get();
    ClusterFeed* feed = ui_feed_.get();
    coordinator_->set_on_export([exporter, feed](const Coordinator::ExportSnapshot& snap) {
      if (exporter != nullptr) exporter->Update(snap);
      if (feed != nullptr) feed->Update(snap);
    });
  }
  if (Status started = coordinator_->Start(); !started.ok()) {
    return Status::Internal("cannot load state from " + db_path_ + ": " + started.message());
  }

  // Code archives of `convoy submit --code` (issue 18): once each, by hash, 0600 in a 0700 dir.
  // On etcd, every archive is kept there too: the next leader has it.
  auto code = CodeStore::Open(flags.state_dir + "/code",
                              etcd_ ? MakeEtcdCodeReplica(*etcd_, flags.etcd_prefix) : nullptr);
  if (!code.ok()) return code.status();
  code_ = std::move(*code);
  security.code = code_.get();
  if (ui_) {
    UiServer* ui = ui_.get();
    security.ui_login = [ui](const Principal& who) { return ui->Login(who); };
  }
  auto server = GrpcServer::Start(*coordinator_, flags.listen, std::move(security), deps.limits,
                                  exporter_.get());
  if (!server.ok()) return server.status();
  server_ = std::move(*server);
  if (ui_) ui_->Attach(*coordinator_, server_->auth(), tokens_.get(), *ui_feed_);
  if (health_) health_->SetLeading(true);
  spdlog::info("convoy-coordinator {} listening on {} ({}; state {})", CONVOY_VERSION, flags.listen,
               flags.insecure ? "PLAIN TEXT" : "TLS", db_path_);
  housekeeping_ = std::thread([this] { Housekeep(); });
  return Status::Ok();
}

Status CoordinatorServer::Secure(const CoordinatorFlags& flags, ServerSecurity* security) {
  const int64_t now_s = system_clock_.NowUnixMs() / 1000;
  StatusOr<ClusterPki> pki = Status::Ok();
  if (!flags.tls_cert.empty()) {
    pki = LoadOwnPki(flags.tls_cert, flags.tls_key, flags.tls_ca, now_s);
  } else {
    auto hp = ParseHostPort(flags.listen, "--listen");
    if (!hp.ok()) return hp.status();
    if (etcd_) CONVOY_RETURN_IF_ERROR(RefuseSecondCa(flags));
    // The web UI's host, too: browsers check the certificate against it.
    std::vector<std::string> sans = flags.tls_sans;
    auto ui = ParseHostPort(flags.ui_listen, "--ui-listen");
    if (ui.ok() && ui->first != hp->first && ui->first != "0.0.0.0" && ui->first != "::") {
      sans.push_back(ui->first);
    }
    pki = EnsureClusterPki(flags.state_dir + "/tls",
                           ServerNames(hp->first, flags.advertise_address, sans), now_s);
  }
  if (!pki.ok()) return Status::Internal("TLS: " + pki.status().message());
  pki_ = *pki;
  if (pki_.created_ca) {
    spdlog::info("made the cluster CA in {}/tls (first start)", flags.state_dir);
  }
  spdlog::info("cluster CA fingerprint {}", pki_.ca_fingerprint);
  if (etcd_) CONVOY_RETURN_IF_ERROR(CheckClusterCa(flags));
  auto tokens = etcd_ ? TokenStore::Open(MakeEtcdTokenBackend(*etcd_, flags.etcd_prefix))
                      : TokenStore::Open(flags.state_dir + "/tokens.db");
  if (!tokens.ok()) return tokens.status();
  tokens_ = std::move(*tokens);
  security->tokens = tokens_.get();
  security->server_cert_pem = pki_.server.cert_pem;
  security->server_key_pem = pki_.server.key_pem;
  security->ca.ca = pki_.ca;
  security->ca.fingerprint = pki_.ca_fingerprint;
  security->ca.cluster_id = cluster_id_;
  security->ca.worker_cert_ttl_s = flags.worker_cert_ttl_s;
  security->auth.max_streams_per_token = flags.max_streams_per_token;
  security->auth.submits_per_minute = flags.submits_per_minute;
  security->auth.upload_bytes_per_day = flags.upload_bytes_per_day;
  security->auth.max_archives_per_user = flags.max_archives_per_user;
  return Status::Ok();
}

StatusOr<CoordinatorOptions> CoordinatorServer::OptionsFrom(const CoordinatorFlags& flags) {
  CoordinatorOptions options;
  options.jobs.lifecycle.cluster_id = cluster_id_;
  options.worker_timeout_ms = static_cast<int64_t>(flags.worker_timeout_s * 1000);
  options.jobs.lifecycle.kill_grace_ms = flags.kill_grace_ms;
  options.jobs.lifecycle.rendezvous_timeout_ms =
      static_cast<int64_t>(flags.rendezvous_timeout_s * 1000);
  options.jobs.heartbeat_interval_ms = flags.heartbeat_interval_ms;
  options.jobs.scheduling.max_queued_per_owner = flags.max_queued_per_user;
  options.jobs.scheduling.quotas.SetDefaults(flags.max_slots_per_user, flags.max_queued_per_user);
  for (const std::string& rule : flags.quotas) {
    if (Status st = options.jobs.scheduling.quotas.Add(rule); !st.ok()) {
      return Status::InvalidArgument(st.message());
    }
  }
  options.jobs.refuse_over_quota = flags.over_quota == "refuse";
  options.jobs.scheduling.preemptible_below = flags.preemptible_below;
  options.jobs.lifecycle.preempt_grace_ms = static_cast<int64_t>(flags.preempt_grace_s * 1000);
  options.jobs.scheduling.min_resize_interval_ms =
      static_cast<int64_t>(flags.min_resize_interval_s * 1000);
  options.jobs.node_faults.jobs_to_cordon = flags.node_fault_jobs;
  options.jobs.node_faults.window_ms = static_cast<int64_t>(flags.node_fault_window_s * 1000);
  if (flags.scheduler == "fifo") {
    scheduler_ = std::make_unique<FifoScheduler>();
  } else {
    PriorityPolicy policy;
    policy.ageing_ms = static_cast<int64_t>(flags.priority_ageing_s * 1000);
    policy.max_slots_per_owner = flags.max_slots_per_user;
    scheduler_ = std::make_unique<PriorityScheduler>(policy);
  }
  options.jobs.scheduling.scheduler = scheduler_.get();
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
  return options;
}

Status CoordinatorServer::ConnectEtcd(const CoordinatorFlags& flags, const Deps& deps) {
  db_path_ = flags.store + " (prefix " + flags.etcd_prefix + ")";
  auto options = EtcdOptionsFromFlags(flags);
  if (!options.ok()) return options.status();
  auto client = EtcdClient::Create(*options);
  if (!client.ok()) return client.status();
  etcd_ = std::move(*client);
  // etcd may not be up yet (started together, or restarting): wait for it, as workers wait
  // for the coordinator.
  bool made = false;
  const std::string candidate = RandomHexId();
  auto cluster_id = LoadOrMakeEtcdClusterId(*etcd_, flags.etcd_prefix, candidate, &made);
  for (std::string said;
       cluster_id.status().code() == StatusCode::kUnavailable && !Stopping(deps);) {
    if (cluster_id.status().message() != said) {
      said = cluster_id.status().message();
      spdlog::warn("waiting for etcd: {}", said);
    }
    if (deps.waiting) deps.waiting("waiting for etcd");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    cluster_id = LoadOrMakeEtcdClusterId(*etcd_, flags.etcd_prefix, candidate, &made);
  }
  if (!cluster_id.ok()) return cluster_id.status();
  cluster_id_ = *cluster_id;
  spdlog::info("cluster id {} (in etcd at {}cluster-id{})", cluster_id_, flags.etcd_prefix,
               made ? "; made now: a new cluster" : "");
  return Status::Ok();
}

Status CoordinatorServer::StartUi(const CoordinatorFlags& flags, const Clock& clock) {
  UiServer::Options ui;
  ui.listen = flags.ui_listen;
  ui.insecure = flags.insecure;
  if (!flags.insecure) {
    ui.cert_pem = pki_.server.cert_pem;
    ui.key_pem = pki_.server.key_pem;
  }
  ui.advertise_host = flags.advertise_address;  // a host, or HOST:PORT
  if (auto adv = ParseHostPort(flags.advertise_address, "--advertise-address"); adv.ok()) {
    ui.advertise_host = adv->first;
  }
  // A follower's page names (and redirects to) whoever leads, as the election key says.
  std::function<std::string()> leader;
  if (etcd_) {
    EtcdClient* etcd = etcd_.get();
    const std::string key = flags.etcd_prefix + "leader";
    leader = [etcd, key] {
      auto kv = etcd->Get(key);
      return kv.ok() ? kv->value() : std::string();
    };
  }
  auto server = UiServer::Start(ui, clock, std::move(leader));
  if (!server.ok()) return server.status();
  ui_ = std::move(*server);
  ui_feed_ = std::make_unique<ClusterFeed>();
  return Status::Ok();
}

bool CoordinatorServer::Stopping(const Deps& deps) {
  return deps.stop_requested && deps.stop_requested();
}

std::string CoordinatorServer::CaFingerprintKey(const CoordinatorFlags& flags) {
  return flags.etcd_prefix + "ca-fingerprint";
}

Status CoordinatorServer::RefuseSecondCa(const CoordinatorFlags& flags) {
  const std::string ca_file = flags.state_dir + "/tls/ca.crt";
  if (std::filesystem::exists(ca_file)) return Status::Ok();  // CheckClusterCa compares it
  auto recorded = etcd_->Get(CaFingerprintKey(flags));
  if (recorded.status().code() == StatusCode::kNotFound) return Status::Ok();  // the first
  if (!recorded.ok()) return recorded.status();
  return Status::FailedPrecondition(
      "TLS: this cluster's CA (fingerprint " + recorded->value() + ", recorded in etcd at " +
      CaFingerprintKey(flags) + ") is not in " + flags.state_dir +
      "/tls: copy ca.crt and ca.key there from a coordinator of this cluster (deploy/README.md "
      "\"High availability on etcd\"); a second CA would make every worker's certificate "
      "unknown to this coordinator");
}

Status CoordinatorServer::CheckClusterCa(const CoordinatorFlags& flags) {
  auto recorded = etcd_->CreateIfAbsent(CaFingerprintKey(flags), pki_.ca_fingerprint);
  if (!recorded.ok()) return recorded.status();
  if (recorded->created) {
    spdlog::info("recorded the cluster CA's fingerprint in etcd at {}", CaFingerprintKey(flags));
    return Status::Ok();
  }
  if (FingerprintMatches(recorded->value, pki_.ca_fingerprint)) return Status::Ok();
  return Status::FailedPrecondition(
      "TLS: this coordinator's CA (" +
      (flags.tls_ca.empty() ? flags.state_dir + "/tls/ca.crt" : "--tls-ca " + flags.tls_ca) +
      ", fingerprint " + pki_.ca_fingerprint + ") is not this cluster's (fingerprint " +
      recorded->value + ", recorded in etcd at " + CaFingerprintKey(flags) +
      "): give every coordinator the same CA (deploy/README.md \"High availability on etcd\")");
}

Status CoordinatorServer::Lead(const CoordinatorFlags& flags, const Deps& deps) {
  LeaderElection::Options election;
  election.key = flags.etcd_prefix + "leader";
  election.value = flags.advertise_address.empty() ? flags.listen : flags.advertise_address;
  election.ttl_s = flags.leader_lease_s;
  election_ = std::make_unique<LeaderElection>(*etcd_, election);
  CONVOY_RETURN_IF_ERROR(election_->Campaign([&deps] {
    if (deps.waiting) deps.waiting("a follower: waiting to lead");
    return Stopping(deps);
  }));
  auto lost = deps.on_leadership_lost;
  election_->StartRenewal([lost](const std::string& why) {
    if (lost) {
      lost(why);
      return;
    }
    spdlog::critical("{}; stopping at once (crash-only: restarted, it campaigns again)", why);
    spdlog::default_logger()->flush();
    std::_Exit(1);
  });
  auto store = std::make_unique<EtcdJobStore>(*etcd_, flags.etcd_prefix);
  store->SetFence(election.key, election_->revision());
  store_ = std::move(store);
  return Status::Ok();
}

void CoordinatorServer::Housekeep() {
  std::unique_lock<std::mutex> lock(housekeeping_mu_);
  int round = 0;
  while (!stopping_) {
    housekeeping_cv_.wait_for(lock, std::chrono::seconds(10));
    if (stopping_) break;
    lock.unlock();
    if (tokens_) tokens_->Flush();
    if (++round % 6 == 0) {
      for (const std::string& sha : code_->Collect(coordinator_->ReferencedCode(), 600)) {
        spdlog::info("code archive {} removed: no job names it", sha);
      }
    }
    lock.lock();
  }
}

void CoordinatorServer::Shutdown(int grace_ms) {
  if (shut_down_) return;
  shut_down_ = true;
  if (housekeeping_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(housekeeping_mu_);
      stopping_ = true;
    }
    housekeeping_cv_.notify_all();
    housekeeping_.join();
  }
  if (health_) health_->Shutdown();
  // The UI's streams hold watches and stream slots: they end before what they watch.
  if (ui_) ui_->Shutdown();
  if (server_) server_->Shutdown(grace_ms);
  if (coordinator_) coordinator_->Stop();
  if (tokens_) tokens_->Flush();
  // What was queued is committed: the next leader may take over at once.
  if (election_) election_->Resign();
}

CoordinatorServer::~CoordinatorServer() {
  Shutdown(0);
  server_.reset();  // before what it serves
  ui_.reset();
  coordinator_.reset();
}

}  // namespace convoy

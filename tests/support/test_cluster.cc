#include "tests/support/test_cluster.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>

#include <unistd.h>

#include "coordinator/store/etcd_client.h"
#include "tests/support/etcd_cluster.h"
#include "worker/daemon/worker_daemon.h"

namespace convoy::testing {

using namespace std::chrono_literals;

// ---- ScriptedWorker

v1::CoordinatorMessage ScriptedWorker::Next() {
  v1::CoordinatorMessage msg;
  EXPECT_TRUE(stream_->Read(&msg)) << "worker " << name_ << ": the stream ended";
  return msg;
}

bool ScriptedWorker::Send(const v1::WorkerMessage& msg) { return stream_->Write(msg); }

grpc::Status ScriptedWorker::Close() {
  stream_->WritesDone();
  v1::CoordinatorMessage ignored;
  while (stream_->Read(&ignored)) {
  }
  return stream_->Finish();
}

// ---- InProcessWorker

InProcessWorker::~InProcessWorker() = default;

Supervisor& InProcessWorker::supervisor() { return daemon_->supervisor(); }

std::string InProcessWorker::job_root() const {
  return std::filesystem::canonical(work_dir_ + "/job-root").string();
}

// ---- TestCluster

TestCluster::Options TestCluster::DefaultOptions() {
  Options o;
  o.flags.metrics_listen = "127.0.0.1:0";
  o.tick_ms = 20;
  o.failure_window_ms = 100;
  // With etcd: a lease that a loaded test machine renews in time (ThreadSanitizer tests two
  // per core let 2 s run out). No test of this cluster kills its leader: a stop resigns.
  o.flags.leader_lease_s = 10;
  return o;
}

TestCluster::TestCluster(Options options) : options_(options) {
  if (options_.etcd) etcd_prefix_ = UniqueEtcdPrefix() + "convoy/";
  StartCoordinator();
}

TestCluster::~TestCluster() {
  workers_.clear();
  StopCoordinator();
}

void TestCluster::StartCoordinator() {
  CoordinatorFlags flags = options_.flags;
  flags.state_dir = dir_.path().string();
  flags.listen = "127.0.0.1:" + std::to_string(port_);
  flags.insecure = !options_.secure;
  if (options_.etcd) {
    flags.store = SharedEtcd().url();
    flags.etcd_prefix = etcd_prefix_;
  }
  CoordinatorServer::Deps deps;
  deps.clock = options_.clock;
  deps.limits = options_.limits;
  const Options& o = options_;
  deps.tune_options = [&o](CoordinatorOptions* c) {
    if (o.tick_ms > 0) c->tick_ms = o.tick_ms;
    if (o.failure_window_ms > 0) c->jobs.lifecycle.failure_window_ms = o.failure_window_ms;
  };
  deps.tune_auth = [&o](AuthOptions* a) {
    if (o.submit_burst > 0) a->submit_burst = o.submit_burst;
  };
  auto server = CoordinatorServer::Create(flags, std::move(deps));
  ASSERT_TRUE(server.ok()) << server.status().message();
  server_ = std::move(*server);
  port_ = server_->port();
  pki_ = server_->pki();
  if (!channel_) {
    channel_ = options_.secure ? SecureChannel(MakeToken("test-cluster", Role::kAdmin))
                               : grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    job_stub_ = v1::JobService::NewStub(channel_);
    worker_stub_ = v1::WorkerService::NewStub(channel_);
  }
}

void TestCluster::StopCoordinator() {
  if (server_) server_->Shutdown(500);
  server_.reset();
}

int TestCluster::StoredRecordsOf(const std::string& id, bool with_file_deletion) {
  if (options_.etcd) {
    EtcdOptions options;
    options.endpoints = SharedEtcd().endpoints();
    auto client = EtcdClient::Create(options);
    if (!client.ok()) return -1;
    auto kvs = (*client)->GetPrefix(etcd_prefix_);
    if (!kvs.ok()) return -1;
    int total = 0;
    for (const auto& kv : *kvs) {
      const std::string key = kv.key().substr(etcd_prefix_.size());
      const bool deletion = key.rfind("deletion/", 0) == 0 && key.size() > id.size() &&
                            key.substr(key.size() - id.size() - 1) == "/" + id;
      if (key == "job/" + id || key.rfind("event/" + id + "/", 0) == 0 || key == "metrics/" + id ||
          (with_file_deletion && deletion)) {
        ++total;
      }
    }
    return total;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return -1;
  }
  int total = 0;
  for (const char* sql :
       {"SELECT count(*) FROM jobs WHERE id = ?", "SELECT count(*) FROM attempts WHERE job_id = ?",
        "SELECT count(*) FROM events WHERE job_id = ?",
        "SELECT count(*) FROM job_metrics WHERE job_id = ?",
        "SELECT count(*) FROM file_deletions WHERE job_id = ?"}) {
    if (!with_file_deletion && std::string(sql).find("file_deletions") != std::string::npos) {
      continue;
    }
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) {
      total = -1000;
      break;
    }
    sqlite3_bind_text(s, 1, id.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(s) == SQLITE_ROW) total += sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return total;
}

std::string TestCluster::address() const { return "127.0.0.1:" + std::to_string(port_); }

std::string TestCluster::MakeToken(const std::string& user, Role role, int64_t ttl_ms, int uses,
                                   const std::string& name) {
  auto token = tokens().Create(user, role, ttl_ms, uses, clock_.NowUnixMs(), nullptr, name);
  EXPECT_TRUE(token.ok()) << token.status().message();
  return token.ok() ? *token : "";
}

std::shared_ptr<grpc::Channel> TestCluster::SecureChannel(const std::string& token,
                                                          const KeyAndCert* key_cert) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pki().ca.cert_pem;
  if (key_cert != nullptr) {
    ssl.pem_private_key = key_cert->key_pem;
    ssl.pem_cert_chain = key_cert->cert_pem;
  }
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::SslCredentials(ssl);
  if (!token.empty()) {
    creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(token));
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  return grpc::CreateCustomChannel(address(), creds, args);
}

KeyAndCert TestCluster::WorkerCertificate(const std::string& name, const KeyAndCert* ca,
                                          int64_t not_before_s, int64_t not_after_s) {
  const int64_t now = clock_.NowUnixMs() / 1000;
  auto key = NewPrivateKey();
  EXPECT_TRUE(key.ok());
  CertTemplate t;
  t.common_name = name;
  t.client = true;
  t.not_before_s = not_before_s != 0 ? not_before_s : now - 3600;
  t.not_after_s = not_after_s != 0 ? not_after_s : now + 3600;
  auto cert = IssueCertificate(ca != nullptr ? *ca : pki().ca, *key, t);
  EXPECT_TRUE(cert.ok()) << cert.status().message();
  return {*key, cert.ok() ? *cert : ""};
}

std::unique_ptr<ScriptedWorker> TestCluster::OpenScripted(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& name, int slots) {
  auto w = std::make_unique<ScriptedWorker>();
  w->name_ = name;
  w->stub_ = v1::WorkerService::NewStub(channel);
  w->stream_ = w->stub_->Connect(&w->ctx_);
  v1::WorkerMessage reg;
  reg.mutable_register_()->set_name(name);
  reg.mutable_register_()->set_address("127.0.0.1");
  reg.mutable_register_()->set_hostname("localhost");
  reg.mutable_register_()->set_cores(slots);
  reg.mutable_register_()->set_slots(slots);
  w->Send(reg);
  return w;
}

std::unique_ptr<ScriptedWorker> TestCluster::ConnectScripted(
    const std::string& name, int slots, const std::vector<v1::AttemptStatus>& attempts) {
  auto w = std::make_unique<ScriptedWorker>();
  w->name_ = name;
  if (options_.secure) {
    const KeyAndCert cert = WorkerCertificate(name);
    w->stub_ = v1::WorkerService::NewStub(SecureChannel("", &cert));
    w->stream_ = w->stub_->Connect(&w->ctx_);
  } else {
    w->stream_ = worker_stub_->Connect(&w->ctx_);
  }
  v1::WorkerMessage reg;
  reg.mutable_register_()->set_name(name);
  reg.mutable_register_()->set_address("127.0.0.1");
  reg.mutable_register_()->set_hostname("localhost");
  reg.mutable_register_()->set_cores(slots);
  reg.mutable_register_()->set_slots(slots);
  for (const v1::AttemptStatus& a : attempts) *reg.mutable_register_()->add_attempts() = a;
  EXPECT_TRUE(w->Send(reg));
  EXPECT_TRUE(w->Next().has_register_ack()) << "worker " << name << " got no RegisterAck";
  return w;
}

InProcessWorker& TestCluster::StartWorker(const std::string& name, int slots,
                                          const std::function<void(WorkerFlags*)>& tune) {
  auto w = std::make_unique<InProcessWorker>();
  w->name_ = name;
  w->work_dir_ = dir_ / ("worker-" + name);
  WorkerFlags flags;
  flags.coordinator = address();
  flags.name = name;
  flags.advertise_address = "127.0.0.1";
  flags.work_dir = w->work_dir_;
  flags.cores = slots;
  flags.slots = slots;
  flags.gpus = "none";
  flags.kill_grace_ms = 1000;
  flags.cgroups = "off";
  flags.snapshot_dir = "none";
  flags.warm_trainers = 0;
  if (geteuid() == 0) {
    flags.run_as = "root";
    flags.allow_root_jobs = true;
  }
  if (options_.secure) {
    flags.join_token = MakeToken("join", Role::kWorker, 3600'000, 1);
    flags.ca_fingerprint = pki().ca_fingerprint;
  } else {
    flags.insecure = true;
  }
  if (tune) tune(&flags);
  WorkerDaemon::Deps deps;
  deps.clock = &w->clock_;
  auto daemon = WorkerDaemon::Create(flags, std::move(deps));
  EXPECT_TRUE(daemon.ok()) << "worker " << name << ": " << daemon.status().message();
  InProcessWorker& ref = *w;
  workers_.push_back(std::move(w));
  if (!daemon.ok()) return ref;
  ref.daemon_ = std::move(*daemon);
  ref.daemon_->Start();
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const v1::WorkerInfo& info : coordinator().ListWorkers()) {
          if (info.name() == name && info.state() == v1::WORKER_READY) return true;
        }
        return false;
      },
      30s))
      << "worker " << name << " did not register";
  return ref;
}

std::string TestCluster::Submit(const v1::JobSpec& spec) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  v1::SubmitJobResponse resp;
  grpc::Status st = job_stub_->SubmitJob(&ctx, req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp.job_id();
}

v1::Job TestCluster::GetJob(const std::string& id) {
  grpc::ClientContext ctx;
  v1::GetJobRequest req;
  req.set_job_id(id);
  v1::Job job;
  grpc::Status st = job_stub_->GetJob(&ctx, req, &job);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return job;
}

bool TestCluster::WaitForState(const std::string& id, v1::JobState state,
                               std::chrono::milliseconds timeout) {
  return WaitFor(
      [&] {
        auto job = coordinator().Get(id);
        return job.ok() && job->state() == state;
      },
      timeout);
}

bool TestCluster::WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

}  // namespace convoy::testing

// Secure by default, over real TLS on loopback: every method of every service refuses
// callers without the right credentials (the table is built from the generated service
// descriptors, so that a method added without an authorisation rule fails here), workers are
// who their certificate says, join tokens buy certificates, people act on their own jobs only,
// and per-token limits hold.
#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "common/pki.h"
#include "convoy/v1/auth.grpc.pb.h"
#include "coordinator/rpc/auth.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/test_cluster.h"

namespace convoy {
namespace coordinator_auth_test {

using namespace std::chrono_literals;
using grpc::StatusCode;

// Calls `method` with one empty request message on `channel` (any kind of method: the call
// is opened as a stream, one message written, the writes closed) and returns the status.
grpc::Status CallGeneric(grpc::Channel* channel, const std::string& method,
                         const std::string& metadata_auth = "") {
  grpc::GenericStub stub(channel->shared_from_this());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  if (!metadata_auth.empty()) ctx.AddMetadata("authorization", metadata_auth);
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&ctx, method, &cq);
  void* tag;
  bool ok;
  bool answered = false;
  auto step = [&](int want) {
    EXPECT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(tag, reinterpret_cast<void*>(static_cast<intptr_t>(want)));
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  if (step(1)) {
    grpc::ByteBuffer empty;
    grpc::Slice nothing("", 0);
    empty = grpc::ByteBuffer(&nothing, 1);
    call->Write(empty, reinterpret_cast<void*>(2));
    if (step(2)) {
      call->WritesDone(reinterpret_cast<void*>(3));
      step(3);
    }
    grpc::ByteBuffer in;
    for (;;) {
      call->Read(&in, reinterpret_cast<void*>(4));
      if (!step(4)) break;
      // A stream that stays open (WatchJob of a live job, Connect that registered) is
      // authorised: that is all this table asks.
      answered = true;
      ctx.TryCancel();
    }
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  // Cancelled by us after an answer came: the call was served.
  if (answered && status.error_code() == StatusCode::CANCELLED) return grpc::Status::OK;
  return status;
}

std::vector<std::string> EveryMethod() {
  std::vector<std::string> methods;
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  // Linking the generated code registers each file in the pool.
  (void)v1::JobService::service_full_name();
  (void)v1::WorkerService::service_full_name();
  (void)v1::JoinService::service_full_name();
  for (const char* file : {"convoy/v1/job.proto", "convoy/v1/worker.proto", "convoy/v1/auth.proto",
                           "convoy/v1/common.proto"}) {
    const google::protobuf::FileDescriptor* f = pool->FindFileByName(file);
    if (f == nullptr) continue;
    for (int s = 0; s < f->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = f->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        methods.push_back("/" + service->full_name() + "/" + service->method(m)->name());
      }
    }
  }
  // gRPC's own health service (no descriptor in the generated pool): public by design.
  methods.push_back("/grpc.health.v1.Health/Check");
  methods.push_back("/grpc.health.v1.Health/Watch");
  return methods;
}

// On either store ("sqlite", "etcd": tokens, certificate records and jobs in etcd).
class CoordinatorAuthTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "etcd" && !testing::EtcdCluster::Available()) {
      GTEST_SKIP() << "etcd is not installed (etcd-server)";
    }
  }
  static bool Etcd() { return GetParam() == "etcd" && testing::EtcdCluster::Available(); }
  static testing::TestCluster::Options Secure() {
    auto o = testing::TestCluster::DefaultOptions();
    o.secure = true;
    o.etcd = Etcd();
    o.flags.max_streams_per_token = 2;
    o.submit_burst = 3;
    o.flags.submits_per_minute = 1;
    o.flags.upload_bytes_per_day = 100;
    o.flags.max_archives_per_user = 3;
    return o;
  }
  std::unique_ptr<v1::JobService::Stub> Jobs(const std::string& token) {
    return v1::JobService::NewStub(cluster_.SecureChannel(token));
  }
  static v1::JobSpec Spec(const std::string& name) {
    v1::JobSpec spec;
    spec.set_name(name);
    spec.set_nodes(1);
    spec.set_procs_per_node(1);
    spec.add_command("true");
    return spec;
  }
  grpc::Status Submit(v1::JobService::Stub& stub, const std::string& name, std::string* id) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec(name);
    v1::SubmitJobResponse resp;
    grpc::Status st = stub.SubmitJob(&ctx, req, &resp);
    if (id != nullptr) *id = resp.job_id();
    return st;
  }
  // One whole archive of `data` in one UploadCode call.
  static grpc::Status Upload(v1::JobService::Stub& stub, const std::string& data) {
    grpc::ClientContext ctx;
    v1::UploadCodeRequest req;
    req.set_sha256(Sha256Hex(data));
    req.set_total_size(static_cast<int64_t>(data.size()));
    req.set_data(data);
    v1::UploadCodeResponse resp;
    return stub.UploadCode(&ctx, req, &resp);
  }
  grpc::Status Cancel(v1::JobService::Stub& stub, const std::string& id) {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_job_id(id);
    v1::Job job;
    return stub.CancelJob(&ctx, req, &job);
  }
  grpc::Status Delete(v1::JobService::Stub& stub, const std::string& id) {
    grpc::ClientContext ctx;
    v1::DeleteJobRequest req;
    req.set_job_id(id);
    v1::DeleteJobResponse resp;
    return stub.DeleteJob(&ctx, req, &resp);
  }
  grpc::Status Logs(v1::JobService::Stub& stub, const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetLogsRequest req;
    req.set_job_id(id);
    auto reader = stub.GetLogs(&ctx, req);
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }
  v1::ListJobsResponse ListJobs(v1::JobService::Stub& stub) {
    grpc::ClientContext ctx;
    v1::ListJobsResponse resp;
    EXPECT_TRUE(stub.ListJobs(&ctx, v1::ListJobsRequest(), &resp).ok());
    return resp;
  }
  v1::ListWorkersResponse ListWorkers(v1::JobService::Stub& stub) {
    grpc::ClientContext ctx;
    v1::ListWorkersResponse resp;
    EXPECT_TRUE(stub.ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).ok());
    return resp;
  }

  testing::TestCluster cluster_{Secure()};
};

TEST_P(CoordinatorAuthTest, EveryMethodRefusesCallersWithoutTheRight) {
  const std::vector<std::string> methods = EveryMethod();
  ASSERT_GE(methods.size(), 13u);
  // Every method has a rule: a new one without fails here (and is refused by default).
  for (const std::string& m : methods) EXPECT_EQ(MethodRights().count(m), 1u) << m;
  EXPECT_EQ(MethodRights().size(), methods.size());

  const std::string admin = cluster_.MakeToken("root", Role::kAdmin);
  const std::string viewer = cluster_.MakeToken("vic", Role::kViewer);
  const std::string revoked = cluster_.MakeToken("rev", Role::kAdmin);
  ASSERT_TRUE(cluster_.tokens().Revoke("rev").ok());
  const std::string expired = cluster_.MakeToken("old", Role::kAdmin, 1);
  std::this_thread::sleep_for(5ms);

  struct Caller {
    std::string what;
    std::shared_ptr<grpc::Channel> channel;
    std::string raw_auth;  // sent as the authorization header itself
  };
  const std::vector<Caller> callers = {
      {"no credentials", cluster_.SecureChannel(""), ""},
      {"not a bearer header", cluster_.SecureChannel(""), "Basic YWxpY2U6c2VjcmV0"},
      {"malformed token", cluster_.SecureChannel("cvy_nonsense"), ""},
      {"revoked token", cluster_.SecureChannel(revoked), ""},
      {"expired token", cluster_.SecureChannel(expired), ""},
      {"viewer token", cluster_.SecureChannel(viewer), ""},
  };
  // What a viewer may do: the read verbs (the empty request names no job: NOT_FOUND, which
  // is past the check).
  const std::map<std::string, StatusCode> viewer_codes = {
      {"/convoy.v1.JobService/GetJob", StatusCode::NOT_FOUND},
      {"/convoy.v1.JobService/ListJobs", StatusCode::OK},
      {"/convoy.v1.JobService/WatchJob", StatusCode::NOT_FOUND},
      {"/convoy.v1.JobService/ListWorkers", StatusCode::OK},
      {"/convoy.v1.JobService/DrainWorker", StatusCode::PERMISSION_DENIED},
      {"/convoy.v1.JobService/ForgetWorker", StatusCode::PERMISSION_DENIED},
      {"/convoy.v1.JobService/CordonWorker", StatusCode::PERMISSION_DENIED},
      {"/convoy.v1.JobService/GetJobMetrics", StatusCode::NOT_FOUND},
      {"/convoy.v1.JobService/SubmitJob", StatusCode::PERMISSION_DENIED},
      {"/convoy.v1.JobService/CancelJob", StatusCode::PERMISSION_DENIED},
      {"/convoy.v1.JobService/DeleteJob", StatusCode::PERMISSION_DENIED},
      {"/convoy.v1.JobService/GetLogs", StatusCode::PERMISSION_DENIED},
      {"/convoy.v1.JoinService/Join", StatusCode::PERMISSION_DENIED},
      {"/convoy.v1.WorkerService/Connect", StatusCode::UNAUTHENTICATED},  // no certificate
      {"/convoy.v1.WorkerService/FetchCode", StatusCode::UNAUTHENTICATED},
      {"/convoy.v1.JobService/UploadCode", StatusCode::PERMISSION_DENIED},
      // Allowed; this cluster serves no web UI (--ui-listen).
      {"/convoy.v1.JobService/CreateUiLogin", StatusCode::FAILED_PRECONDITION},
      {"/convoy.v1.JoinService/Renew", StatusCode::UNAUTHENTICATED},
  };
  for (const Caller& caller : callers) {
    for (const std::string& m : methods) {
      StatusCode want = StatusCode::UNAUTHENTICATED;
      if (m == "/convoy.v1.JoinService/GetClusterInfo" || m.rfind("/grpc.health.v1.", 0) == 0) {
        want = StatusCode::OK;  // public: the CA certificate; whether the server is up
      } else if (caller.what == "viewer token") {
        ASSERT_EQ(viewer_codes.count(m), 1u) << m << ": say what a viewer gets";
        want = viewer_codes.at(m);
      }
      grpc::Status st = CallGeneric(caller.channel.get(), m, caller.raw_auth);
      EXPECT_EQ(st.error_code(), want)
          << caller.what << " calling " << m << ": " << st.error_message();
      if (want == StatusCode::PERMISSION_DENIED) {
        EXPECT_NE(st.error_message().find("lacks the right"), std::string::npos)
            << st.error_message();
      }
    }
  }
  // Nothing changed.
  auto as_admin = Jobs(admin);
  EXPECT_EQ(ListJobs(*as_admin).jobs_size(), 0);
  EXPECT_EQ(ListWorkers(*as_admin).workers_size(), 0);
}

TEST_P(CoordinatorAuthTest, AWorkerIsTheNameInItsCertificate) {
  auto as_admin = Jobs(cluster_.MakeToken("root", Role::kAdmin));
  // w1's certificate registering as w2: refused, and no w2 appears.
  const KeyAndCert w1_cert = cluster_.WorkerCertificate("w1");
  auto impostor = cluster_.OpenScripted(cluster_.SecureChannel("", &w1_cert), "w2");
  grpc::Status refused = impostor->Close();
  EXPECT_EQ(refused.error_code(), StatusCode::PERMISSION_DENIED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("'w1'"), std::string::npos);
  EXPECT_EQ(ListWorkers(*as_admin).workers_size(), 0);

  // A certificate from another CA, an expired one, none: no stream, no worker.
  auto other_ca = NewCertificateAuthority("not the cluster's", std::time(nullptr), 86400);
  ASSERT_TRUE(other_ca.ok());
  const KeyAndCert foreign = cluster_.WorkerCertificate("w3", &*other_ca);
  const int64_t now = std::time(nullptr);
  const KeyAndCert expired = cluster_.WorkerCertificate("w4", nullptr, now - 7200, now - 3600);
  for (const KeyAndCert* cert : {&foreign, &expired}) {
    auto w = cluster_.OpenScripted(cluster_.SecureChannel("", cert), "w3");
    grpc::Status st = w->Close();
    EXPECT_FALSE(st.ok());
    EXPECT_TRUE(st.error_code() == StatusCode::UNAVAILABLE ||
                st.error_code() == StatusCode::UNAUTHENTICATED)
        << st.error_code() << " " << st.error_message();
  }
  EXPECT_EQ(ListWorkers(*as_admin).workers_size(), 0);

  // w1 and w2 as themselves; a job placed on w2; w1 cannot report for w2's rank.
  auto w1 = cluster_.ConnectScripted("w1");
  auto w2 = cluster_.ConnectScripted("w2");
  EXPECT_EQ(ListWorkers(*as_admin).workers_size(), 2);
  // Fill w1's only slot first, so that the second job lands on w2.
  std::string first, second;
  ASSERT_TRUE(Submit(*as_admin, "on-first", &first).ok());
  ASSERT_TRUE(Submit(*as_admin, "on-second", &second).ok());
  std::map<std::string, testing::ScriptedWorker*> placed;
  for (testing::ScriptedWorker* w : {w1.get(), w2.get()}) {
    v1::CoordinatorMessage reserve = w->Next();
    ASSERT_TRUE(reserve.has_reserve_port());
    placed[reserve.reserve_port().job_id()] = w;
  }
  ASSERT_EQ(placed.size(), 2u);
  testing::ScriptedWorker* owner = placed[second];
  testing::ScriptedWorker* other = placed[first];
  v1::WorkerMessage forged;
  forged.mutable_port_reserved()->set_job_id(second);
  forged.mutable_port_reserved()->set_port(40000);
  other->Send(forged);
  v1::WorkerMessage forged_exit;
  forged_exit.mutable_process_exited()->set_job_id(second);
  forged_exit.mutable_process_exited()->mutable_exit()->set_exit_code(1);
  other->Send(forged_exit);
  v1::WorkerMessage forged_fail;
  forged_fail.mutable_launch_failed()->set_job_id(second);
  forged_fail.mutable_launch_failed()->set_error("forged");
  other->Send(forged_fail);
  // The real owner's port goes through, and the job is still placed and not failed.
  v1::WorkerMessage port;
  port.mutable_port_reserved()->set_job_id(second);
  port.mutable_port_reserved()->set_port(45678);
  owner->Send(port);
  v1::CoordinatorMessage launch = owner->Next();
  ASSERT_TRUE(launch.has_launch());
  EXPECT_EQ(launch.launch().master_port(), 45678);  // not the forged 40000
  v1::Job job = cluster_.GetJob(second);
  EXPECT_NE(job.state(), v1::FAILED) << job.message();
}

TEST_P(CoordinatorAuthTest, JoinTokensBuyWorkerCertificatesOnce) {
  auto join = [&](const std::string& token, const std::string& name, std::string* key_out,
                  v1::JoinResponse* resp) {
    auto key = NewPrivateKey();
    auto csr = NewCertificateRequest(*key, name);
    auto stub = v1::JoinService::NewStub(cluster_.SecureChannel(token));
    grpc::ClientContext ctx;
    v1::JoinRequest req;
    req.set_name(name);
    req.set_csr_pem(*csr);
    if (key_out != nullptr) *key_out = *key;
    return stub->Join(&ctx, req, resp);
  };
  const std::string token = cluster_.MakeToken("join", Role::kWorker, 3600'000, 1);
  std::string key;
  v1::JoinResponse joined;
  grpc::Status st = join(token, "w7", &key, &joined);
  ASSERT_TRUE(st.ok()) << st.error_message();
  auto info = InspectCertificate(joined.cert_pem());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->common_name, "w7");
  EXPECT_EQ(info->not_after_s, joined.not_after_unix_s());
  EXPECT_TRUE(
      VerifyCertificate(joined.cert_pem(), cluster_.pki().ca.cert_pem, std::time(nullptr)).ok());
  EXPECT_EQ(joined.ca_pem(), cluster_.pki().ca.cert_pem);

  // Used up, expired, a person's token: refused.
  v1::JoinResponse again;
  EXPECT_EQ(join(token, "w8", nullptr, &again).error_code(), StatusCode::UNAUTHENTICATED);
  const std::string short_lived = cluster_.MakeToken("join", Role::kWorker, 1);
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(join(short_lived, "w8", nullptr, &again).error_code(), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(join(cluster_.MakeToken("alice", Role::kAdmin), "w8", nullptr, &again).error_code(),
            StatusCode::PERMISSION_DENIED);
  // A bad name or CSR does not use the token up.
  const std::string spare = cluster_.MakeToken("join", Role::kWorker, 3600'000, 1);
  EXPECT_EQ(join(spare, "bad name!", nullptr, &again).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(join(spare, "w9", nullptr, &again).ok());

  // The certificate works on the worker stream, for its own name, and renews itself.
  const KeyAndCert mine{key, joined.cert_pem()};
  auto channel = cluster_.SecureChannel("", &mine);
  auto w7 = cluster_.OpenScripted(channel, "w7");
  EXPECT_TRUE(w7->Next().has_register_ack());
  auto renew_key = NewPrivateKey();
  v1::RenewRequest renew;
  renew.set_csr_pem(*NewCertificateRequest(*renew_key, "someone-else"));
  v1::JoinResponse renewed;
  grpc::ClientContext ctx;
  st = v1::JoinService::NewStub(channel)->Renew(&ctx, renew, &renewed);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(InspectCertificate(renewed.cert_pem())->common_name, "w7");  // not the CSR's
  EXPECT_TRUE(KeyMatchesCertificate(*renew_key, renewed.cert_pem()).ok());
}

TEST_P(CoordinatorAuthTest, OnlyAdminsDrainWorkers) {
  auto alice = Jobs(cluster_.MakeToken("alice", Role::kUser));
  auto admin = Jobs(cluster_.MakeToken("root", Role::kAdmin));
  auto drain = [](v1::JobService::Stub& stub, const std::string& name, bool on,
                  v1::WorkerInfo* out) {
    grpc::ClientContext ctx;
    v1::DrainWorkerRequest req;
    req.set_name(name);
    req.set_drain(on);
    return stub.DrainWorker(&ctx, req, out);
  };
  v1::WorkerInfo info;
  grpc::Status st = drain(*alice, "w1", true, &info);
  EXPECT_EQ(st.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("workers.drain"), std::string::npos) << st.error_message();
  EXPECT_EQ(drain(*admin, "nobody", true, &info).error_code(), StatusCode::NOT_FOUND);
  auto w1 = cluster_.ConnectScripted("w1");
  st = drain(*admin, "w1", true, &info);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(info.drained());
  EXPECT_EQ(info.drained_by(), "root");
  ASSERT_TRUE(drain(*admin, "w1", false, &info).ok());
  EXPECT_FALSE(info.drained());
  // `now` without a drain is refused, naming the field (and answered once: gRPC asserts on a
  // call's reactor taken twice in builds with assertions, the TSAN build's).
  grpc::ClientContext ctx;
  v1::DrainWorkerRequest req;
  req.set_name("w1");
  req.set_drain(false);
  req.set_now(true);
  st = admin->DrainWorker(&ctx, req, &info);
  EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("now:"), std::string::npos) << st.error_message();
}

// `convoy worker forget`: admins only, a LOST worker only; gone after a restart too.
class CoordinatorForgetWorkerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CoordinatorForgetWorkerTest, OnlyAdminsForgetAndOnlyALostWorker) {
  if (GetParam() == "etcd" && !testing::EtcdCluster::Available()) {
    GTEST_SKIP() << "etcd is not installed (etcd-server)";
  }
  auto o = testing::TestCluster::DefaultOptions();
  o.secure = true;
  o.etcd = GetParam() == "etcd";
  o.flags.worker_timeout_s = 0.3;
  testing::TestCluster cluster(o);
  const std::string admin_token = cluster.MakeToken("root", Role::kAdmin);
  auto alice =
      v1::JobService::NewStub(cluster.SecureChannel(cluster.MakeToken("alice", Role::kUser)));
  auto admin = v1::JobService::NewStub(cluster.SecureChannel(admin_token));
  auto forget = [](v1::JobService::Stub& stub, const std::string& name,
                   v1::ForgetWorkerResponse* out = nullptr) {
    grpc::ClientContext ctx;
    v1::ForgetWorkerRequest req;
    req.set_name(name);
    v1::ForgetWorkerResponse resp;
    grpc::Status st = stub.ForgetWorker(&ctx, req, &resp);
    if (out != nullptr) *out = resp;
    return st;
  };
  auto states = [](v1::JobService::Stub& stub) {
    std::map<std::string, v1::WorkerState> out;
    grpc::ClientContext ctx;
    v1::ListWorkersResponse resp;
    if (!stub.ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).ok()) return out;
    for (const v1::WorkerInfo& w : resp.workers()) out[w.name()] = w.state();
    return out;
  };

  grpc::Status st = forget(*alice, "w1");
  EXPECT_EQ(st.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("workers.forget"), std::string::npos) << st.error_message();
  EXPECT_EQ(forget(*admin, "nobody").error_code(), StatusCode::NOT_FOUND);
  st = forget(*admin, "");
  EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("name"), std::string::npos) << st.error_message();

  // Its stream open: refused, naming it, even once it is LOST (it sends no heartbeat).
  auto w1 = cluster.ConnectScripted("w1");
  st = forget(*admin, "w1");
  EXPECT_EQ(st.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("worker w1 is connected"), std::string::npos)
      << st.error_message();
  ASSERT_TRUE(
      testing::TestCluster::WaitFor([&] { return states(*admin)["w1"] == v1::WORKER_LOST; }, 10s));
  EXPECT_EQ(forget(*admin, "w1").error_code(), StatusCode::FAILED_PRECONDITION);

  w1->Close();
  ASSERT_TRUE(testing::TestCluster::WaitFor(
      [&] { return cluster.coordinator().streams().size() == 0; }, 10s));
  EXPECT_EQ(forget(*alice, "w1").error_code(), StatusCode::PERMISSION_DENIED);
  v1::ForgetWorkerResponse resp;
  st = forget(*admin, "w1", &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.worker().name(), "w1");
  EXPECT_EQ(resp.worker().state(), v1::WORKER_LOST);
  EXPECT_TRUE(states(*admin).empty());
  EXPECT_EQ(forget(*admin, "w1").error_code(), StatusCode::NOT_FOUND);

  // Out of the store: still gone after a restart.
  cluster.StopCoordinator();
  cluster.StartCoordinator();
  auto again = v1::JobService::NewStub(cluster.SecureChannel(admin_token));
  ASSERT_TRUE(testing::TestCluster::WaitFor(
      [&] { return forget(*again, "w1").error_code() == StatusCode::NOT_FOUND; }, 10s));
  EXPECT_TRUE(states(*again).empty());
}

TEST_P(CoordinatorAuthTest, PeopleActOnTheirOwnJobsAndAdminsOnAll) {
  auto alice = Jobs(cluster_.MakeToken("alice", Role::kUser));
  auto bob = Jobs(cluster_.MakeToken("bob", Role::kUser));
  auto admin = Jobs(cluster_.MakeToken("root", Role::kAdmin));
  std::string id;
  ASSERT_TRUE(Submit(*alice, "alices", &id).ok());
  EXPECT_EQ(cluster_.GetJob(id).owner(), "alice");
  EXPECT_EQ(ListJobs(*bob).jobs(0).owner(), "alice");  // reading is for everyone

  grpc::Status st = Cancel(*bob, id);
  EXPECT_EQ(st.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("jobs.cancel"), std::string::npos) << st.error_message();
  st = Logs(*bob, id);
  EXPECT_EQ(st.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("logs.read"), std::string::npos) << st.error_message();
  EXPECT_EQ(cluster_.GetJob(id).state(), v1::PENDING);

  // alice may read her own job's logs (not placed yet: NOT_FOUND, past the check).
  EXPECT_EQ(Logs(*alice, id).error_code(), StatusCode::NOT_FOUND);
  ASSERT_TRUE(Cancel(*admin, id).ok());
  v1::Job job = cluster_.GetJob(id);
  EXPECT_EQ(job.state(), v1::CANCELLED);
  EXPECT_EQ(job.events(0).reason(), "submitted by alice");
  EXPECT_EQ(job.events(job.events_size() - 1).reason(), "cancelled by root");

  // Deleting: the owner or an admin (jobs.delete), and only a finished job.
  std::string running;
  ASSERT_TRUE(Submit(*admin, "roots", &running).ok());
  st = Delete(*bob, id);
  EXPECT_EQ(st.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("jobs.delete"), std::string::npos) << st.error_message();
  st = Delete(*admin, running);
  EXPECT_EQ(st.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("cancel it first"), std::string::npos) << st.error_message();
  ASSERT_TRUE(Delete(*alice, id).ok());
  grpc::ClientContext get_ctx;
  v1::GetJobRequest get;
  get.set_job_id(id);
  EXPECT_EQ(admin->GetJob(&get_ctx, get, &job).error_code(), StatusCode::NOT_FOUND);
  EXPECT_EQ(Delete(*alice, id).error_code(), StatusCode::NOT_FOUND);
}

// Issue 28: a job names only code its owner uploaded. Bob knows the hash of alice's code
// (GetJob shows it) but not the bytes: his job naming it is refused, naming the field; an
// admin's is not; bob uploading the same bytes himself makes it his too.
TEST_P(CoordinatorAuthTest, AJobNamesOnlyCodeItsOwnerUploaded) {
  auto alice = Jobs(cluster_.MakeToken("alice", Role::kUser));
  auto bob = Jobs(cluster_.MakeToken("bob", Role::kUser));
  auto admin = Jobs(cluster_.MakeToken("root", Role::kAdmin));
  const std::string code = "alice's code archive";
  const std::string sha = Sha256Hex(code);
  auto upload = [&](v1::JobService::Stub& stub, const std::string& data) {
    grpc::ClientContext ctx;
    v1::UploadCodeRequest req;
    req.set_sha256(sha);
    req.set_total_size(static_cast<int64_t>(code.size()));
    req.set_data(data);
    v1::UploadCodeResponse resp;
    grpc::Status st = stub.UploadCode(&ctx, req, &resp);
    return st.ok() && resp.complete();
  };
  auto submit = [&](v1::JobService::Stub& stub) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec("with-code");
    req.mutable_spec()->set_code_sha256(sha);
    v1::SubmitJobResponse resp;
    return stub.SubmitJob(&ctx, req, &resp);
  };
  ASSERT_TRUE(upload(*alice, code));
  ASSERT_TRUE(submit(*alice).ok());
  EXPECT_FALSE(upload(*bob, ""));  // naming the hash is not having the bytes
  grpc::Status st = submit(*bob);
  EXPECT_EQ(st.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_NE(
      st.error_message().find("code_sha256: code archive " + sha + " was not uploaded by bob"),
      std::string::npos)
      << st.error_message();
  EXPECT_TRUE(submit(*admin).ok());
  ASSERT_TRUE(upload(*bob, code));
  EXPECT_TRUE(submit(*bob).ok());
}

// Issue 28, bounded uploads: each user may upload --upload-bytes-per-day (100 bytes here),
// whatever token they use; past it RESOURCE_EXHAUSTED says what is left and when; another
// user's quota is their own and admins have none.
TEST_P(CoordinatorAuthTest, UploadsAreBoundedPerUserADay) {
  auto alice = Jobs(cluster_.MakeToken("alice", Role::kUser));
  auto alice2 = Jobs(cluster_.MakeToken("alice", Role::kUser));
  EXPECT_TRUE(Upload(*alice, std::string(60, 'a')).ok());
  grpc::Status st = Upload(*alice2, std::string(60, 'b'));  // her other token: the same quota
  EXPECT_EQ(st.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("upload quota: alice may upload 100 B a day"),
            std::string::npos)
      << st.error_message();
  EXPECT_NE(st.error_message().find("retry in"), std::string::npos) << st.error_message();
  EXPECT_TRUE(Upload(*alice2, std::string(40, 'c')).ok());  // what is left still goes
  auto bob = Jobs(cluster_.MakeToken("bob", Role::kUser));
  EXPECT_TRUE(Upload(*bob, std::string(60, 'b')).ok());
  auto admin = Jobs(cluster_.MakeToken("root", Role::kAdmin));
  EXPECT_TRUE(Upload(*admin, std::string(200, 'd')).ok());
}

TEST_P(CoordinatorAuthTest, PerTokenLimitsAnswerResourceExhaustedWithARetryHint) {
  auto alice = Jobs(cluster_.MakeToken("alice", Role::kUser));
  std::string id;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Submit(*alice, "j" + std::to_string(i), &id).ok());
  grpc::Status st = Submit(*alice, "one-too-many", nullptr);
  EXPECT_EQ(st.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("retry in"), std::string::npos) << st.error_message();
  // Another user's bucket is their own.
  auto bob = Jobs(cluster_.MakeToken("bob", Role::kUser));
  EXPECT_TRUE(Submit(*bob, "bobs", nullptr).ok());

  // Two watches per token; the third is refused until one ends.
  grpc::ClientContext c1, c2, c3, c4;
  v1::WatchJobRequest req;
  req.set_job_id(id);
  v1::WatchJobResponse first;
  auto w1 = alice->WatchJob(&c1, req);
  ASSERT_TRUE(w1->Read(&first));
  auto w2 = alice->WatchJob(&c2, req);
  ASSERT_TRUE(w2->Read(&first));
  auto w3 = alice->WatchJob(&c3, req);
  EXPECT_FALSE(w3->Read(&first));
  st = w3->Finish();
  EXPECT_EQ(st.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  c1.TryCancel();
  w1->Finish();
  ASSERT_TRUE(testing::TestCluster::WaitFor(
      [&] {
        grpc::ClientContext c;
        c.set_deadline(std::chrono::system_clock::now() + 2s);
        auto w = alice->WatchJob(&c, req);
        v1::WatchJobResponse r;
        const bool ok = w->Read(&r);
        c.TryCancel();
        w->Finish();
        return ok;
      },
      5s));
  c2.TryCancel();
  w2->Finish();
}

// Issue 28: a join token takes only a free name. A connected worker's name, or one with an
// unexpired certificate, needs a token bound to it (replacing that machine), or an admin's
// `workers forget` first; a bound token joins as its name and nothing else.
TEST_P(CoordinatorAuthTest, AJoinTokenTakesOnlyAFreeNameUnlessBoundToIt) {
  auto join = [&](const std::string& token, const std::string& name) {
    auto key = NewPrivateKey();
    auto stub = v1::JoinService::NewStub(cluster_.SecureChannel(token));
    grpc::ClientContext ctx;
    v1::JoinRequest req;
    req.set_name(name);
    req.set_csr_pem(*NewCertificateRequest(*key, name));
    v1::JoinResponse resp;
    return stub->Join(&ctx, req, &resp);
  };
  auto bound = [&](const std::string& name) {
    return cluster_.MakeToken("join", Role::kWorker, 3600'000, 1, name);
  };
  const std::string two = cluster_.MakeToken("join", Role::kWorker, 3600'000, 2);
  ASSERT_TRUE(join(two, "w7").ok());
  // w7 holds an unexpired certificate: a leaked token cannot take it, and is not used up.
  grpc::Status st = join(two, "w7");
  EXPECT_EQ(st.error_code(), StatusCode::ALREADY_EXISTS);
  EXPECT_NE(st.error_message().find("certificate valid until"), std::string::npos)
      << st.error_message();
  EXPECT_NE(st.error_message().find("--name w7"), std::string::npos) << st.error_message();
  // A connected worker's name, the same.
  auto w1 = cluster_.ConnectScripted("w1");
  st = join(two, "w1");
  EXPECT_EQ(st.error_code(), StatusCode::ALREADY_EXISTS);
  EXPECT_NE(st.error_message().find("a connected worker"), std::string::npos) << st.error_message();
  EXPECT_TRUE(join(two, "w8").ok());  // its second use, on a free name

  // A token bound to w7 joins as w7 (the machine is replaced), once, and as nothing else.
  const std::string for_w7 = bound("w7");
  st = join(for_w7, "w9");
  EXPECT_EQ(st.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("joins only as 'w7'"), std::string::npos) << st.error_message();
  EXPECT_TRUE(join(for_w7, "w7").ok());
  EXPECT_EQ(join(for_w7, "w7").error_code(), StatusCode::UNAUTHENTICATED);  // used up
  EXPECT_TRUE(join(bound("w1"), "w1").ok());                                // even while connected

  // Forgetting a name frees it: only an admin may, and only once its worker is gone.
  auto forget = [](v1::JobService::Stub& stub, const std::string& name) {
    grpc::ClientContext ctx;
    v1::ForgetWorkerRequest req;
    req.set_name(name);
    v1::ForgetWorkerResponse resp;
    return stub.ForgetWorker(&ctx, req, &resp);
  };
  auto alice = Jobs(cluster_.MakeToken("alice", Role::kUser));
  auto admin = Jobs(cluster_.MakeToken("root", Role::kAdmin));
  EXPECT_EQ(forget(*alice, "w8").error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(forget(*admin, "w1").error_code(), StatusCode::FAILED_PRECONDITION);  // connected
  const std::string fresh = cluster_.MakeToken("join", Role::kWorker, 3600'000, 1);
  EXPECT_EQ(join(fresh, "w8").error_code(), StatusCode::ALREADY_EXISTS);
  ASSERT_TRUE(forget(*admin, "w8").ok());  // joined, never registered: its certificate record
  EXPECT_TRUE(join(fresh, "w8").ok());
  EXPECT_EQ(forget(*admin, "nobody").error_code(), StatusCode::NOT_FOUND);
}

// Issue 28: revoking a token ends its open streams (a watch here, `logs -f` alike) at the
// next revocation check, with UNAUTHENTICATED; another token's stream stays open.
TEST_P(CoordinatorAuthTest, ARevokedTokensOpenStreamsAreClosed) {
  const std::string alice_token = cluster_.MakeToken("alice", Role::kUser);
  auto alice = Jobs(alice_token);
  auto bob = Jobs(cluster_.MakeToken("bob", Role::kUser));
  std::string id;
  ASSERT_TRUE(Submit(*alice, "watched", &id).ok());
  v1::WatchJobRequest req;
  req.set_job_id(id);
  grpc::ClientContext ca, cb;
  // Deadlines far beyond the check period: the stream must end by revocation, not by them.
  ca.set_deadline(std::chrono::system_clock::now() + 30s);
  cb.set_deadline(std::chrono::system_clock::now() + 30s);
  v1::WatchJobResponse update;
  auto wa = alice->WatchJob(&ca, req);
  ASSERT_TRUE(wa->Read(&update));
  auto wb = bob->WatchJob(&cb, req);
  ASSERT_TRUE(wb->Read(&update));
  std::string token_id, secret;
  ASSERT_TRUE(SplitToken(alice_token, &token_id, &secret));
  ASSERT_TRUE(cluster_.tokens().Revoke(token_id).ok());
  while (wa->Read(&update)) {
  }
  grpc::Status st = wa->Finish();
  EXPECT_EQ(st.error_code(), StatusCode::UNAUTHENTICATED) << st.error_message();
  EXPECT_NE(st.error_message().find("revoked"), std::string::npos) << st.error_message();
  // Bob's stream is still open: a cancel ends it, not the revocation.
  cb.TryCancel();
  while (wb->Read(&update)) {
  }
  EXPECT_EQ(wb->Finish().error_code(), StatusCode::CANCELLED);
}

// Issue 28: each user keeps at most --max-archives-per-user archives; sending one of theirs
// again is no new archive; another user's count is their own; admins have no limit.
TEST_P(CoordinatorAuthTest, ArchivesKeptAreBoundedPerUser) {
  auto alice = Jobs(cluster_.MakeToken("alice", Role::kUser));
  for (const char* data : {"archive-1", "archive-2", "archive-3"}) {
    EXPECT_TRUE(Upload(*alice, data).ok()) << data;
  }
  grpc::Status st = Upload(*alice, "archive-4");
  EXPECT_EQ(st.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("--max-archives-per-user 3"), std::string::npos)
      << st.error_message();
  EXPECT_TRUE(Upload(*alice, "archive-2").ok());  // hers already
  auto bob = Jobs(cluster_.MakeToken("bob", Role::kUser));
  EXPECT_TRUE(Upload(*bob, "archive-4").ok());
  EXPECT_TRUE(Upload(*bob, "archive-1").ok());  // the same bytes: now his too
  auto admin = Jobs(cluster_.MakeToken("root", Role::kAdmin));
  for (const char* data : {"a-1", "a-2", "a-3", "a-4"}) EXPECT_TRUE(Upload(*admin, data).ok());
}

INSTANTIATE_TEST_SUITE_P(BothStores, CoordinatorAuthTest, ::testing::Values("sqlite", "etcd"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(BothStores, CoordinatorForgetWorkerTest,
                         ::testing::Values("sqlite", "etcd"),
                         [](const auto& info) { return info.param; });

}  // namespace coordinator_auth_test
}  // namespace convoy

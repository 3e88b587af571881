// The coordinator's gRPC services over real loopback gRPC with a real SQLite file, on the
// in-process test cluster. The worker side is a scripted stream (the network edge), so every
// message can be checked.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/support/etcd_cluster.h"
#include "tests/support/test_cluster.h"

namespace convoy {
namespace coordinator_grpc_test {

using namespace std::chrono_literals;

class CoordinatorGrpcTest : public ::testing::Test {
 protected:
  using ScriptedWorker = testing::ScriptedWorker;
  std::unique_ptr<ScriptedWorker> Connect(const std::string& name) {
    return cluster_->ConnectScripted(name);
  }
  v1::Job GetJob(const std::string& id) { return cluster_->GetJob(id); }

  std::unique_ptr<testing::TestCluster> cluster_ = std::make_unique<testing::TestCluster>();
  v1::JobService::Stub* job_stub_ = &cluster_->jobs();
};

TEST_F(CoordinatorGrpcTest, JobRunsOverTheWorkerStreamAndWatchEndsWithTheOutcome) {
  auto w1 = Connect("w1");
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_name("echo");
  submit.mutable_spec()->set_nodes(1);
  submit.mutable_spec()->set_procs_per_node(1);
  submit.mutable_spec()->add_command("echo");
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(job_stub_->SubmitJob(&ctx, submit, &submitted).ok());
  }
  const std::string id = submitted.job_id();

  grpc::ClientContext watch_ctx;
  v1::WatchJobRequest watch_req;
  watch_req.set_job_id(id);
  auto watch = job_stub_->WatchJob(&watch_ctx, watch_req);

  v1::CoordinatorMessage reserve = w1->Next();
  ASSERT_TRUE(reserve.has_reserve_port());
  v1::WorkerMessage port;
  port.mutable_port_reserved()->set_job_id(id);
  port.mutable_port_reserved()->set_port(45678);
  w1->Send(port);
  v1::CoordinatorMessage launch = w1->Next();
  ASSERT_TRUE(launch.has_launch());
  EXPECT_EQ(launch.launch().master_port(), 45678);
  EXPECT_EQ(launch.launch().spec().command(0), "echo");

  v1::WorkerMessage started;
  started.mutable_process_started()->set_job_id(id);
  started.mutable_process_started()->set_pid(4242);
  w1->Send(started);
  v1::WorkerMessage metrics;
  metrics.mutable_metrics()->set_job_id(id);
  auto* rec = metrics.mutable_metrics()->add_records();
  rec->set_step(7);
  rec->set_has_step(true);
  (*rec->mutable_values())["test_accuracy"] = 0.9;
  w1->Send(metrics);
  v1::WorkerMessage exited;
  exited.mutable_process_exited()->set_job_id(id);
  w1->Send(exited);

  std::vector<v1::JobState> states;
  bool saw_metric = false;
  v1::WatchJobResponse update;
  v1::Job last;
  while (watch->Read(&update)) {
    if (update.has_event()) states.push_back(update.event().to());
    if (update.has_metric()) saw_metric = update.metric().step() == 7;
    if (update.has_job()) last = update.job();
  }
  EXPECT_TRUE(watch->Finish().ok());
  EXPECT_TRUE(saw_metric);
  EXPECT_EQ(last.state(), v1::SUCCEEDED);
  ASSERT_EQ(last.latest_size(), 1);
  EXPECT_DOUBLE_EQ(last.latest(0).values().at("test_accuracy"), 0.9);
  ASSERT_FALSE(states.empty());
  EXPECT_EQ(states.back(), v1::SUCCEEDED);
}

TEST_F(CoordinatorGrpcTest, BadRequestsGetClearErrors) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest submit;  // empty spec
  v1::SubmitJobResponse resp;
  grpc::Status st = job_stub_->SubmitJob(&ctx, submit, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("name"), std::string::npos) << st.error_message();

  grpc::ClientContext ctx2;
  v1::GetJobRequest get;
  get.set_job_id("j-424242");
  v1::Job job;
  EXPECT_EQ(job_stub_->GetJob(&ctx2, get, &job).error_code(), grpc::StatusCode::NOT_FOUND);

  // A worker whose first message is not a registration is refused; the server stays up.
  auto worker_stub = v1::WorkerService::NewStub(
      grpc::CreateChannel(cluster_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext wctx;
  auto stream = worker_stub->Connect(&wctx);
  v1::WorkerMessage hb;
  hb.mutable_heartbeat();
  stream->Write(hb);
  stream->WritesDone();
  v1::CoordinatorMessage msg;
  EXPECT_FALSE(stream->Read(&msg));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext wctx2;
  auto bad_name = worker_stub->Connect(&wctx2);
  v1::WorkerMessage reg;
  reg.mutable_register_()->set_name("../evil");
  bad_name->Write(reg);
  bad_name->WritesDone();
  EXPECT_FALSE(bad_name->Read(&msg));
  grpc::Status bad = bad_name->Finish();
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("register.name"), std::string::npos);

  auto w1 = Connect("w1");  // still serving
  grpc::ClientContext lctx;
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(job_stub_->ListWorkers(&lctx, v1::ListWorkersRequest(), &workers).ok());
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_EQ(workers.workers(0).state(), v1::WORKER_READY);
}

TEST_F(CoordinatorGrpcTest, LogsAreFetchedFromTheWorkerThatRanTheRank) {
  auto w1 = Connect("w1");
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_name("logs");
  submit.mutable_spec()->set_nodes(1);
  submit.mutable_spec()->set_procs_per_node(1);
  submit.mutable_spec()->add_command("echo");
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(job_stub_->SubmitJob(&ctx, submit, &submitted).ok());
  }
  ASSERT_TRUE(w1->Next().has_reserve_port());

  std::thread answer([&] {
    v1::CoordinatorMessage read = w1->Next();
    ASSERT_TRUE(read.has_read_logs());
    EXPECT_EQ(read.read_logs().rank(), 0);
    v1::WorkerMessage data;
    data.mutable_log_data()->set_request_id(read.read_logs().request_id());
    data.mutable_log_data()->set_data("hello from rank 0\n");
    data.mutable_log_data()->set_next_offset(18);
    data.mutable_log_data()->set_eof(true);
    w1->Send(data);
  });
  grpc::ClientContext ctx;
  v1::GetLogsRequest req;
  req.set_job_id(submitted.job_id());
  req.set_rank(0);
  auto reader = job_stub_->GetLogs(&ctx, req);
  std::string text;
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) text += chunk.data();
  EXPECT_TRUE(reader->Finish().ok());
  answer.join();
  EXPECT_EQ(text, "hello from rank 0\n");

  grpc::ClientContext ctx2;
  req.set_rank(3);
  auto missing = job_stub_->GetLogs(&ctx2, req);
  while (missing->Read(&chunk)) {
  }
  grpc::Status st = missing->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);  // `convoy logs` exits 2
  EXPECT_NE(st.error_message().find("has no rank 3; its ranks are 0"), std::string::npos)
      << st.error_message();
}

// Runs `job` (one rank on `w`) up to RUNNING: reserve port, launch, started.
void StartOneRank(testing::ScriptedWorker& w, const std::string& job) {
  ASSERT_TRUE(w.Next().has_reserve_port());
  v1::WorkerMessage port;
  port.mutable_port_reserved()->set_job_id(job);
  port.mutable_port_reserved()->set_port(40000);
  ASSERT_TRUE(w.Send(port));
  v1::CoordinatorMessage launch = w.Next();
  ASSERT_TRUE(launch.has_launch());
  ASSERT_EQ(launch.launch().ranks_size(), 1);
  v1::WorkerMessage started;
  started.mutable_process_started()->set_job_id(job);
  started.mutable_process_started()->set_pid(4242);
  ASSERT_TRUE(w.Send(started));
}

v1::JobSpec OneRankSpec(const std::string& name) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("true");
  return spec;
}

TEST(CoordinatorSlowClients, AWatcherThatNeverReadsDelaysNeitherTheJobNorOtherClients) {
  auto options = testing::TestCluster::DefaultOptions();
  options.limits.watch_queue = 8;
  testing::TestCluster cluster(options);
  auto w1 = cluster.ConnectScripted("w1");
  const std::string id = cluster.Submit(OneRankSpec("slow-watch"));

  // The slow client: opens a watch and never reads it.
  grpc::ClientContext slow_ctx;
  v1::WatchJobRequest req;
  req.set_job_id(id);
  auto slow = cluster.jobs().WatchJob(&slow_ctx, req);
  StartOneRank(*w1, id);
  ASSERT_TRUE(cluster.WaitForState(id, v1::RUNNING));

  // Far more than flow control and the queue hold: ~40 MB of metric updates.
  for (int batch = 0; batch < 40; ++batch) {
    v1::WorkerMessage metrics;
    metrics.mutable_metrics()->set_job_id(id);
    for (int i = 0; i < 10; ++i) {
      auto* rec = metrics.mutable_metrics()->add_records();
      rec->set_step(batch * 10 + i);
      rec->set_has_step(true);
      for (int k = 0; k < 100; ++k) {
        (*rec->mutable_values())["k" + std::to_string(k) + std::string(1000, 'x')] = k;
      }
    }
    ASSERT_TRUE(w1->Send(metrics));
  }
  v1::WorkerMessage exited;
  exited.mutable_process_exited()->set_job_id(id);
  ASSERT_TRUE(w1->Send(exited));

  // The job finishes and other clients are served while the slow one has read nothing.
  EXPECT_TRUE(cluster.WaitForState(id, v1::SUCCEEDED));
  grpc::ClientContext list_ctx;
  v1::ListJobsResponse listed;
  ASSERT_TRUE(cluster.jobs().ListJobs(&list_ctx, v1::ListJobsRequest(), &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).state(), v1::SUCCEEDED);
  grpc::ClientContext watch_ctx;
  auto fast = cluster.jobs().WatchJob(&watch_ctx, req);
  v1::WatchJobResponse update;
  v1::Job last;
  while (fast->Read(&update)) {
    if (update.has_job()) last = update.job();
  }
  EXPECT_TRUE(fast->Finish().ok());
  EXPECT_EQ(last.state(), v1::SUCCEEDED);

  // The slow watcher was dropped, not waited for: what it still holds in its buffers ends
  // before the job does, and its call ends in error (the server cancels it, so the client
  // sees CANCELLED; the server's log names the slow client).
  bool slow_saw_end = false;
  while (slow->Read(&update)) {
    slow_saw_end = slow_saw_end || (update.has_job() && update.job().state() == v1::SUCCEEDED);
  }
  EXPECT_FALSE(slow_saw_end);
  EXPECT_FALSE(slow->Finish().ok());
}

// On either store ("sqlite", "etcd").
class CoordinatorRestart : public ::testing::TestWithParam<std::string> {};

TEST_P(CoordinatorRestart, ARunningJobSurvivesACoordinatorRestartAndItsWorkerComesBack) {
  if (GetParam() == "etcd" && !testing::EtcdCluster::Available()) {
    GTEST_SKIP() << "etcd is not installed (etcd-server)";
  }
  auto options = testing::TestCluster::DefaultOptions();
  options.etcd = GetParam() == "etcd";
  testing::TestCluster cluster(options);
  auto w1 = cluster.ConnectScripted("w1");
  const std::string id = cluster.Submit(OneRankSpec("survivor"));
  StartOneRank(*w1, id);
  ASSERT_TRUE(cluster.WaitForState(id, v1::RUNNING));
  cluster.coordinator().Flush();

  cluster.StopCoordinator();
  w1->Close();
  cluster.StartCoordinator();
  EXPECT_EQ(cluster.GetJob(id).state(), v1::RUNNING);

  // The worker re-registers, reporting its rank still running, then the rank ends well.
  v1::AttemptStatus running;
  running.set_job_id(id);
  running.set_attempt(0);
  v1::RankStatus* rank = running.add_ranks();
  rank->set_pid(4242);
  rank->set_running(true);
  auto back = cluster.ConnectScripted("w1", 1, {running});
  v1::WorkerMessage exited;
  exited.mutable_process_exited()->set_job_id(id);
  ASSERT_TRUE(back->Send(exited));
  EXPECT_TRUE(cluster.WaitForState(id, v1::SUCCEEDED));
  EXPECT_EQ(cluster.GetJob(id).restarts(), 0);
}

INSTANTIATE_TEST_SUITE_P(BothStores, CoordinatorRestart, ::testing::Values("sqlite", "etcd"),
                         [](const auto& info) { return info.param; });

TEST(CoordinatorLogs, FollowWaitsOnTheWorkerInsteadOfPolling) {
  testing::TestCluster cluster;
  auto w1 = cluster.ConnectScripted("w1");
  const std::string id = cluster.Submit(OneRankSpec("follow"));
  StartOneRank(*w1, id);
  ASSERT_TRUE(cluster.WaitForState(id, v1::RUNNING));

  grpc::ClientContext ctx;
  v1::GetLogsRequest req;
  req.set_job_id(id);
  req.set_rank(0);
  req.set_follow(true);
  auto reader = cluster.jobs().GetLogs(&ctx, req);
  auto answer = [&](const v1::ReadLogs& read, const std::string& data, bool eof) {
    v1::WorkerMessage msg;
    msg.mutable_log_data()->set_request_id(read.request_id());
    msg.mutable_log_data()->set_data(data);
    msg.mutable_log_data()->set_next_offset(read.offset() + static_cast<int64_t>(data.size()));
    msg.mutable_log_data()->set_eof(eof);
    ASSERT_TRUE(w1->Send(msg));
  };
  // First read: no waiting; nothing yet.
  v1::CoordinatorMessage first = w1->Next();
  ASSERT_TRUE(first.has_read_logs());
  EXPECT_EQ(first.read_logs().wait_ms(), 0);
  answer(first.read_logs(), "", false);
  // Then one held request at a time: the worker answers when bytes arrive.
  v1::CoordinatorMessage held = w1->Next();
  ASSERT_TRUE(held.has_read_logs());
  EXPECT_GT(held.read_logs().wait_ms(), 0);
  answer(held.read_logs(), "line 1\n", false);
  v1::LogChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  EXPECT_EQ(chunk.data(), "line 1\n");
  v1::CoordinatorMessage next = w1->Next();
  ASSERT_TRUE(next.has_read_logs());
  EXPECT_EQ(next.read_logs().offset(), 7);
  answer(next.read_logs(), "", true);
  EXPECT_FALSE(reader->Read(&chunk));
  EXPECT_TRUE(reader->Finish().ok());
}

TEST(CoordinatorCluster, RealInProcessWorkersRunATwoNodeJob) {
  testing::TestCluster cluster;
  cluster.StartWorker("w1");
  cluster.StartWorker("w2");
  v1::JobSpec spec = OneRankSpec("two-nodes");
  spec.set_nodes(2);
  const std::string id = cluster.Submit(spec);
  EXPECT_TRUE(cluster.WaitForState(id, v1::SUCCEEDED));
  const v1::Job job = cluster.GetJob(id);
  ASSERT_EQ(job.attempts_size(), 1);
  EXPECT_EQ(job.attempts(0).exits_size(), 2);
}

}  // namespace coordinator_grpc_test
}  // namespace convoy

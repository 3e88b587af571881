// The coordinator's gRPC services over real loopback gRPC with a real SQLite file. The
// worker side is a scripted stream (the network edge), so every message can be checked.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "coordinator/grpc_service.h"
#include "coordinator/sqlite_job_store.h"

namespace convoy {
namespace {

using namespace std::chrono_literals;

class CoordinatorGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("convoy-grpc-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = SqliteJobStore::Open((dir_ / "convoy.db").string());
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(*store);
    registry_ = std::make_unique<WorkerRegistry>(clock_, 10000);
    JobManagerOptions options;
    options.failure_window_ms = 100;
    jobs_ = std::make_unique<JobManager>(clock_, *store_, *registry_, streams_, options);
    ASSERT_TRUE(jobs_->Recover().ok());
    worker_service_ = std::make_unique<WorkerServiceImpl>(mu_, *jobs_, streams_);
    job_service_ = std::make_unique<JobServiceImpl>(mu_, *jobs_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(worker_service_.get());
    builder.RegisterService(job_service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_GT(port, 0);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                       grpc::InsecureChannelCredentials());
    job_stub_ = v1::JobService::NewStub(channel);
    worker_stub_ = v1::WorkerService::NewStub(channel);
    ticker_ = std::thread([this] {
      while (!stop_) {
        std::this_thread::sleep_for(20ms);
        std::lock_guard<std::mutex> lock(mu_);
        jobs_->Tick();
      }
    });
  }

  void TearDown() override {
    stop_ = true;
    if (ticker_.joinable()) ticker_.join();
    streams_.CloseAll();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    std::filesystem::remove_all(dir_);
  }

  // A scripted worker: one Connect stream.
  struct FakeWorker {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream;

    v1::CoordinatorMessage Next() {
      v1::CoordinatorMessage msg;
      EXPECT_TRUE(stream->Read(&msg));
      return msg;
    }
    void Send(const v1::WorkerMessage& msg) { EXPECT_TRUE(stream->Write(msg)); }
  };

  std::unique_ptr<FakeWorker> Connect(const std::string& name) {
    auto w = std::make_unique<FakeWorker>();
    w->stream = worker_stub_->Connect(&w->ctx);
    v1::WorkerMessage reg;
    reg.mutable_register_()->set_name(name);
    reg.mutable_register_()->set_address("127.0.0.1");
    reg.mutable_register_()->set_hostname("localhost");
    reg.mutable_register_()->set_cores(1);
    reg.mutable_register_()->set_slots(1);
    w->Send(reg);
    v1::CoordinatorMessage ack = w->Next();
    EXPECT_TRUE(ack.has_register_ack());
    return w;
  }

  v1::Job GetJob(const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_job_id(id);
    v1::Job job;
    EXPECT_TRUE(job_stub_->GetJob(&ctx, req, &job).ok());
    return job;
  }

  SystemClock clock_;
  std::filesystem::path dir_;
  std::unique_ptr<SqliteJobStore> store_;
  std::unique_ptr<WorkerRegistry> registry_;
  WorkerStreams streams_;
  std::mutex mu_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::JobService::Stub> job_stub_;
  std::unique_ptr<v1::WorkerService::Stub> worker_stub_;
  std::atomic<bool> stop_{false};
  std::thread ticker_;
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
  grpc::ClientContext wctx;
  auto stream = worker_stub_->Connect(&wctx);
  v1::WorkerMessage hb;
  hb.mutable_heartbeat();
  stream->Write(hb);
  stream->WritesDone();
  v1::CoordinatorMessage msg;
  EXPECT_FALSE(stream->Read(&msg));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext wctx2;
  auto bad_name = worker_stub_->Connect(&wctx2);
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
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("rank 3"), std::string::npos);
}

}  // namespace
}  // namespace convoy

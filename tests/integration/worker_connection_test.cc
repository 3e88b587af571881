// The whole worker (connection, supervisor, POSIX launcher) against an in-process fake
// WorkerService on a free loopback port (a fake at the network edge): it registers,
// heartbeats, launches and reports, kills, and after the coordinator restarts it registers
// again with the state of what it still runs.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "convoy/v1/worker.grpc.pb.h"
#include "worker/exec/posix_process_launcher.h"
#include "worker/exec/rank_env.h"
#include "worker/link/coordinator_connection.h"
#include "worker/supervise/supervisor.h"

namespace convoy {
namespace {

using namespace std::chrono_literals;
using Stream = grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>;

// Records what the worker sends; acknowledges Register; sends what the test asks.
class FakeCoordinator : public v1::WorkerService::Service {
 public:
  grpc::Status Connect(grpc::ServerContext* context, Stream* stream) override {
    v1::WorkerMessage msg;
    if (!stream->Read(&msg)) return grpc::Status::OK;
    if (!msg.has_register_()) {
      std::lock_guard<std::mutex> lock(mu_);
      received_.push_back(msg);
      cv_.notify_all();
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "register first");
    }
    v1::CoordinatorMessage ack;
    ack.mutable_register_ack()->set_heartbeat_interval_ms(100);
    {
      // The stream is usable (Send) before the test sees the Register, not after.
      std::lock_guard<std::mutex> write_lock(write_mu_);
      stream->Write(ack);
      std::lock_guard<std::mutex> lock(mu_);
      stream_ = stream;
      received_.push_back(msg);
      cv_.notify_all();
    }
    while (stream->Read(&msg)) {
      std::lock_guard<std::mutex> lock(mu_);
      received_.push_back(msg);
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> write_lock(write_mu_);  // no Write is in flight on it
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
    return grpc::Status::OK;
  }

  bool Send(const v1::CoordinatorMessage& msg) {
    std::lock_guard<std::mutex> write_lock(write_mu_);
    Stream* stream;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stream = stream_;
    }
    return stream != nullptr && stream->Write(msg);
  }

  // The first message of kind `c` (it and every message before it are consumed).
  std::optional<v1::WorkerMessage> Next(v1::WorkerMessage::MsgCase c,
                                        std::chrono::milliseconds limit = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<v1::WorkerMessage> found;
    cv_.wait_for(lock, limit, [&] {
      while (!received_.empty()) {
        v1::WorkerMessage m = std::move(received_.front());
        received_.pop_front();
        if (m.msg_case() == c) {
          found = std::move(m);
          return true;
        }
      }
      return false;
    });
    return found;
  }

 private:
  std::mutex write_mu_;  // serializes writes; taken before mu_
  std::mutex mu_;
  std::condition_variable cv_;
  Stream* stream_ = nullptr;  // guarded by mu_ (and write_mu_ to clear it)
  std::deque<v1::WorkerMessage> received_;
};

class WorkerConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("convoy-conn-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    StartServer(0);
  }
  void TearDown() override {
    if (supervisor_) supervisor_->Stop();
    if (connection_) connection_->Shutdown();
    if (conn_thread_.joinable()) conn_thread_.join();
    supervisor_.reset();
    connection_.reset();
    StopServer();
    std::filesystem::remove_all(dir_);
  }

  void StartServer(int port) {
    service_ = std::make_unique<FakeCoordinator>();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_ != nullptr);
    ASSERT_GT(port_, 0);
  }
  void StopServer() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 200ms);
    server_.reset();
    service_.reset();
  }

  void StartWorker() {
    WorkerConfig config;
    config.name = "w1";
    config.address = "127.0.0.1";
    config.hostname = "test-host";
    config.work_dir = dir_.string();
    config.trainer_path = "/nonexistent/convoy-trainer";
    config.cores = 2;
    config.slots = 2;
    config.kill_grace_ms = 2000;
    config.env = ProcessEnvironment();
    supervisor_ = std::make_unique<Supervisor>(config, launcher_, reports_, clock_);
    connection_ = std::make_unique<CoordinatorConnection>(
        "127.0.0.1:" + std::to_string(port_), nullptr, reports_, *supervisor_, config.work_dir);
    supervisor_->Start();
    conn_thread_ = std::thread([this] { connection_->Run(); });
  }

  static v1::CoordinatorMessage Launch(const std::string& job, std::vector<std::string> argv) {
    v1::CoordinatorMessage m;
    v1::Launch* l = m.mutable_launch();
    l->set_job_id(job);
    l->set_attempt(0);
    l->set_num_nodes(1);
    l->set_local_world_size(1);
    l->set_world_size(1);
    l->add_ranks(0);
    l->set_master_addr("127.0.0.1");
    l->set_master_port(29500);
    for (auto& a : argv) l->mutable_spec()->add_command(a);
    return m;
  }

  std::filesystem::path dir_;
  int port_ = 0;
  std::unique_ptr<FakeCoordinator> service_;
  std::unique_ptr<grpc::Server> server_;
  SystemClock clock_;
  PosixProcessLauncher launcher_;
  ReportQueue reports_;
  std::unique_ptr<CoordinatorConnection> connection_;
  std::unique_ptr<Supervisor> supervisor_;
  std::thread conn_thread_;
};

TEST_F(WorkerConnectionTest, RegistersHeartbeatsLaunchesKillsAndReconnects) {
  StartWorker();
  auto reg = service_->Next(v1::WorkerMessage::kRegister);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->register_().name(), "w1");
  EXPECT_EQ(reg->register_().address(), "127.0.0.1");
  EXPECT_EQ(reg->register_().hostname(), "test-host");
  EXPECT_EQ(reg->register_().cores(), 2);
  EXPECT_EQ(reg->register_().slots(), 2);
  EXPECT_EQ(reg->register_().version(), CONVOY_VERSION);
  EXPECT_EQ(reg->register_().attempts_size(), 0);
  ASSERT_TRUE(service_->Next(v1::WorkerMessage::kHeartbeat).has_value());
  ASSERT_TRUE(service_->Next(v1::WorkerMessage::kHeartbeat).has_value());  // and again

  // A rank that fails.
  ASSERT_TRUE(service_->Send(Launch("hi", {"/bin/sh", "-c", "echo hi; echo oops >&2; exit 3"})));
  auto started = service_->Next(v1::WorkerMessage::kProcessStarted);
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->process_started().job_id(), "hi");
  EXPECT_GT(started->process_started().pid(), 0);
  auto exited = service_->Next(v1::WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().exit().exit_code(), 3);
  ASSERT_EQ(exited->process_exited().exit().stderr_tail_size(), 1);
  EXPECT_EQ(exited->process_exited().exit().stderr_tail(0), "oops");

  // Its log, over the stream.
  v1::CoordinatorMessage read;
  read.mutable_read_logs()->set_request_id(42);
  read.mutable_read_logs()->set_job_id("hi");
  read.mutable_read_logs()->set_max_bytes(1000);
  ASSERT_TRUE(service_->Send(read));
  auto logs = service_->Next(v1::WorkerMessage::kLogData);
  ASSERT_TRUE(logs.has_value());
  EXPECT_EQ(logs->log_data().request_id(), 42);
  EXPECT_EQ(logs->log_data().data(), "hi\noops\n");
  EXPECT_TRUE(logs->log_data().eof());

  // A rank that is killed.
  ASSERT_TRUE(service_->Send(Launch("sleeper", {"sleep", "1000"})));
  ASSERT_TRUE(service_->Next(v1::WorkerMessage::kProcessStarted).has_value());
  v1::CoordinatorMessage kill;
  kill.mutable_kill()->set_job_id("sleeper");
  kill.mutable_kill()->set_grace_ms(2000);
  kill.mutable_kill()->set_reason("test");
  ASSERT_TRUE(service_->Send(kill));
  exited = service_->Next(v1::WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().job_id(), "sleeper");
  EXPECT_EQ(exited->process_exited().exit().signal(), SIGTERM);
  EXPECT_EQ(exited->process_exited().exit().signal_name(), "SIGTERM");
  EXPECT_TRUE(exited->process_exited().exit().killed_by_worker());

  // One that is still running when the coordinator restarts; "hi" is forgotten before.
  ASSERT_TRUE(service_->Send(Launch("survivor", {"sleep", "1000"})));
  started = service_->Next(v1::WorkerMessage::kProcessStarted);
  ASSERT_TRUE(started.has_value());
  v1::CoordinatorMessage forget;
  forget.mutable_forget_attempt()->set_job_id("hi");
  ASSERT_TRUE(service_->Send(forget));
  ASSERT_TRUE(service_->Send(kill));  // "sleeper" again: idempotent
  ASSERT_TRUE(service_->Next(v1::WorkerMessage::kHeartbeat).has_value());  // all handled
  const int port = port_;
  StopServer();
  StartServer(port);
  reg = service_->Next(v1::WorkerMessage::kRegister);
  ASSERT_TRUE(reg.has_value()) << "no reconnection";
  std::map<std::string, v1::AttemptStatus> attempts;
  for (const auto& a : reg->register_().attempts()) attempts[a.job_id()] = a;
  EXPECT_EQ(attempts.count("hi"), 0u);  // forgotten
  ASSERT_EQ(attempts.count("sleeper"), 1u);
  EXPECT_FALSE(attempts["sleeper"].ranks(0).running());
  EXPECT_EQ(attempts["sleeper"].ranks(0).exit().signal_name(), "SIGTERM");
  ASSERT_EQ(attempts.count("survivor"), 1u);
  ASSERT_EQ(attempts["survivor"].ranks_size(), 1);
  EXPECT_TRUE(attempts["survivor"].ranks(0).running());
  EXPECT_EQ(attempts["survivor"].ranks(0).pid(), started->process_started().pid());

  // The new coordinator can still stop it.
  kill.mutable_kill()->set_job_id("survivor");
  ASSERT_TRUE(service_->Send(kill));
  exited = service_->Next(v1::WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().job_id(), "survivor");
}

TEST_F(WorkerConnectionTest, ReservesAPortAndRefusesBadLaunches) {
  StartWorker();
  ASSERT_TRUE(service_->Next(v1::WorkerMessage::kRegister).has_value());
  ASSERT_TRUE(service_->Next(v1::WorkerMessage::kHeartbeat).has_value());
  v1::CoordinatorMessage reserve;
  reserve.mutable_reserve_port()->set_job_id("j");
  reserve.mutable_reserve_port()->set_attempt(2);
  ASSERT_TRUE(service_->Send(reserve));
  auto port = service_->Next(v1::WorkerMessage::kPortReserved);
  ASSERT_TRUE(port.has_value());
  EXPECT_EQ(port->port_reserved().attempt(), 2);
  EXPECT_GT(port->port_reserved().port(), 0);
  v1::CoordinatorMessage absurd = Launch("big", {"true"});
  absurd.mutable_launch()->set_local_world_size(100000);
  ASSERT_TRUE(service_->Send(absurd));
  auto failed = service_->Next(v1::WorkerMessage::kLaunchFailed);
  ASSERT_TRUE(failed.has_value());
  EXPECT_NE(failed->launch_failed().error().find("local_world_size 100000"), std::string::npos);
  ASSERT_TRUE(service_->Send(Launch("empty", {})));
  failed = service_->Next(v1::WorkerMessage::kLaunchFailed);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->launch_failed().job_id(), "empty");
  ASSERT_TRUE(service_->Next(v1::WorkerMessage::kHeartbeat).has_value());  // still alive
}

}  // namespace
}  // namespace convoy

// The whole worker (built by WorkerDaemon::Create: connection, supervisor, POSIX launcher)
// against an in-process fake WorkerService on a free loopback port (a fake at the network
// edge): it registers, heartbeats, launches and reports, kills, and after the coordinator
// restarts it registers again with the state of what it still runs.
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
#include "tests/support/fake_worker_service.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/supervise/worker_config.h"

namespace convoy {
namespace worker_connection_test {

using namespace std::chrono_literals;

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
    worker_.reset();  // stops every rank, then the stream
    StopServer();
    std::filesystem::remove_all(dir_);
  }

  void StartServer(int port) {
    server_ = std::make_unique<testing::FakeCoordinatorServer>(100, port);
    ASSERT_TRUE(server_->ok());
    port_ = server_->port();
    service_ = &server_->service();
  }
  void StopServer() {
    server_.reset();
    service_ = nullptr;
  }

  // A whole worker, built by its composition root as convoy-worker is.
  void StartWorker() {
    WorkerFlags flags;
    flags.coordinator = "127.0.0.1:" + std::to_string(port_);
    flags.name = "w1";
    flags.advertise_address = "127.0.0.1";
    flags.work_dir = dir_.string();
    flags.trainer = "/nonexistent/convoy-trainer";
    flags.cores = 2;
    flags.slots = 2;
    flags.gpus = "none";
    flags.kill_grace_ms = 2000;
    flags.cgroups = "off";
    flags.snapshot_dir = "none";
    flags.warm_trainers = 0;
    flags.prefill_data = {"none"};
    flags.insecure = true;
    if (geteuid() == 0) {  // ranks reach the test's own directory as its user
      flags.run_as = "root";
      flags.allow_root_jobs = true;
    }
    WorkerDaemon::Deps deps;
    deps.tune_config = [](WorkerConfig* config) { config->hostname = "test-host"; };
    auto worker = WorkerDaemon::Create(flags, std::move(deps));
    ASSERT_TRUE(worker.ok()) << worker.status().message();
    worker_ = std::move(*worker);
    worker_->Start();
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
  std::unique_ptr<testing::FakeCoordinatorServer> server_;
  testing::FakeWorkerService* service_ = nullptr;
  std::unique_ptr<WorkerDaemon> worker_;
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

}  // namespace worker_connection_test
}  // namespace convoy

// The supervisor with the POSIX launcher and real processes (/bin/sh scripts, python3 for
// the metrics socket), in a whole worker built by WorkerDaemon::Create against a fake
// coordinator at the network edge: environment, exit reports with stderr tails, log files, killing
// a process group with a grandchild, and metric records over the socket with SO_PEERCRED.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "tests/support/fake_worker_service.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/host/users.h"
#include "worker/supervise/supervisor.h"

namespace convoy {
namespace worker_supervisor_processes_test {

using namespace std::chrono_literals;

constexpr const char* kPython = "/usr/bin/python3";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Alive(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  return stat.substr(stat.rfind(')') + 2, 1) != "Z";
}

bool PollUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

class SupervisorProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("convoy-supp-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    StartServer(0);
    flags_.name = "w1";
    flags_.advertise_address = "127.0.0.1";
    flags_.work_dir = dir_.string();
    flags_.cores = 2;
    flags_.slots = 2;
    flags_.gpus = "none";
    flags_.kill_grace_ms = 5000;
    flags_.cgroups = "off";
    flags_.snapshot_dir = "none";
    flags_.warm_trainers = 0;
    flags_.prefill_data = {"none"};
    flags_.attempt_dir_retention_s = 0;
    flags_.insecure = true;
    if (geteuid() == 0) {  // as before identities: the ranks run as the test does
      flags_.run_as = "root";
      flags_.allow_root_jobs = true;
    }
  }
  void TearDown() override {
    worker_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  // The fake coordinator, on `port` (0: a free one, kept for the next StartServer).
  void StartServer(int port) {
    server_ = std::make_unique<testing::FakeCoordinatorServer>(1000, port);
    ASSERT_TRUE(server_->ok());
    port_ = server_->port();
  }
  testing::FakeWorkerService& coordinator() { return server_->service(); }
  // A whole worker, built by its composition root from `flags_`, as convoy-worker is.
  void Start() {
    flags_.coordinator = "127.0.0.1:" + std::to_string(port_);
    auto worker = WorkerDaemon::Create(flags_);
    ASSERT_TRUE(worker.ok()) << worker.status().message();
    worker_ = std::move(*worker);
    worker_->Start();
  }
  // Waits for its Register (the coordinator acknowledged it at once).
  void Connect() { ASSERT_TRUE(coordinator().Next(v1::WorkerMessage::kRegister).has_value()); }
  // From the coordinator; with none connected, given to the supervisor as the link would.
  void Post(const v1::CoordinatorMessage& m) {
    if (server_ == nullptr || !coordinator().Send(m)) worker_->supervisor().Post(m);
  }
  // One rank (rank `group_rank` of `nodes` nodes x 1) running `command`.
  void Launch(const std::string& job, std::vector<std::string> command, int group_rank = 0,
              int nodes = 1) {
    v1::CoordinatorMessage m;
    v1::Launch* l = m.mutable_launch();
    l->set_job_id(job);
    l->set_attempt(0);
    l->set_group_rank(group_rank);
    l->set_num_nodes(nodes);
    l->set_local_world_size(1);
    l->set_world_size(nodes);
    l->add_ranks(group_rank);
    l->set_master_addr("127.0.0.1");
    l->set_master_port(29500);
    l->set_run_id(job);
    for (auto& c : command) l->mutable_spec()->add_command(c);
    Post(m);
  }
  void Kill(const std::string& job, int grace_ms) {
    v1::CoordinatorMessage m;
    m.mutable_kill()->set_job_id(job);
    m.mutable_kill()->set_grace_ms(grace_ms);
    Post(m);
  }
  std::string AttemptDir(const std::string& job) {
    return dir_.string() + "/jobs/" + job + "/attempt-0";
  }

  std::filesystem::path dir_;
  WorkerFlags flags_;
  int port_ = 0;
  std::unique_ptr<testing::FakeCoordinatorServer> server_;
  std::unique_ptr<WorkerDaemon> worker_;
};

TEST_F(SupervisorProcessesTest, EnvironmentExitCodeStderrTailAndLogFile) {
  Start();
  Connect();
  Launch("env", {"/bin/sh", "-c",
                 "echo \"rank=$RANK world=$WORLD_SIZE job=$CONVOY_JOB_ID pwd=$(pwd)\"; "
                 "i=1; while [ $i -le 30 ]; do echo err$i >&2; i=$((i+1)); done; "
                 "printf no-newline >&2; exit 3"});
  auto started = coordinator().Next(v1::WorkerMessage::kProcessStarted);
  ASSERT_TRUE(started.has_value());
  auto exited = coordinator().Next(v1::WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  const v1::ProcessExit& e = exited->process_exited().exit();
  EXPECT_EQ(exited->process_exited().pid(), started->process_started().pid());
  EXPECT_EQ(e.exit_code(), 3);
  EXPECT_EQ(e.signal(), 0);
  EXPECT_FALSE(e.killed_by_worker());
  ASSERT_EQ(e.stderr_tail_size(), 20);  // the last 20 lines, the unterminated one included
  EXPECT_EQ(e.stderr_tail(0), "err12");
  EXPECT_EQ(e.stderr_tail(18), "err30");
  EXPECT_EQ(e.stderr_tail(19), "no-newline");
  const std::string log = ReadFile(AttemptDir("env") + "/rank-0.log");
  // The rank runs in its job's own directory (issue 12); its log stays with the worker.
  EXPECT_NE(log.find("rank=0 world=1 job=env pwd=" + dir_.string() + "/job-root/env\n"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("err1\nerr2\n"), std::string::npos);
  // ReadLogs: the last bytes, at the end of a finished rank.
  v1::CoordinatorMessage read;
  read.mutable_read_logs()->set_request_id(3);
  read.mutable_read_logs()->set_job_id("env");
  read.mutable_read_logs()->set_rank(0);
  read.mutable_read_logs()->set_offset(-10);
  read.mutable_read_logs()->set_max_bytes(100);
  Post(read);
  auto data = coordinator().Next(v1::WorkerMessage::kLogData);
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->log_data().data(), "no-newline");
  EXPECT_EQ(data->log_data().next_offset(), static_cast<int64_t>(log.size()));
  EXPECT_TRUE(data->log_data().eof());
  // From the start, in small pieces: not at the end, so no eof.
  read.mutable_read_logs()->set_offset(0);
  read.mutable_read_logs()->set_max_bytes(4);
  Post(read);
  data = coordinator().Next(v1::WorkerMessage::kLogData);
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->log_data().data(), "rank");
  EXPECT_EQ(data->log_data().next_offset(), 4);
  EXPECT_FALSE(data->log_data().eof());
}

TEST_F(SupervisorProcessesTest, ExecFailureBecomesLaunchFailed) {
  Start();
  Connect();
  Launch("bad", {"/nonexistent/program", "x"});
  auto failed = coordinator().Next(v1::WorkerMessage::kLaunchFailed);
  ASSERT_TRUE(failed.has_value());
  EXPECT_NE(failed->launch_failed().error().find("/nonexistent/program: No such file"),
            std::string::npos)
      << failed->launch_failed().error();
  EXPECT_NE(ReadFile(AttemptDir("bad") + "/rank-0.log").find("No such file"), std::string::npos);
}

TEST_F(SupervisorProcessesTest, KillTakesTheWholeProcessGroupAfterTheGrace) {
  Start();
  Connect();
  // The rank ignores SIGTERM and has a child (in its process group) that does too.
  Launch("stubborn", {"/bin/sh", "-c", "trap '' TERM; sleep 1000 & echo child=$!; wait"});
  auto started = coordinator().Next(v1::WorkerMessage::kProcessStarted);
  ASSERT_TRUE(started.has_value());
  const std::string log_path = AttemptDir("stubborn") + "/rank-0.log";
  ASSERT_TRUE(PollUntil([&] { return ReadFile(log_path).find('\n') != std::string::npos; }));
  const pid_t child = std::stoi(ReadFile(log_path).substr(6));
  ASSERT_TRUE(Alive(child));
  EXPECT_EQ(getpgid(child), started->process_started().pid());
  const auto began = std::chrono::steady_clock::now();
  Kill("stubborn", 300);
  auto exited = coordinator().Next(v1::WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - began, 300ms);  // it had its grace
  EXPECT_EQ(exited->process_exited().exit().signal_name(), "SIGKILL");
  EXPECT_TRUE(exited->process_exited().exit().killed_by_worker());
  EXPECT_TRUE(PollUntil([&] { return !Alive(child); })) << "grandchild " << child << " survived";
}

TEST_F(SupervisorProcessesTest, ChildrenLeftBehindDieWithTheRank) {
  Start();
  Connect();
  // The rank exits at once; the child it leaves in its process group must not linger.
  Launch("leaver", {"/bin/sh", "-c", "sleep 1000 & echo child=$!"});
  auto exited = coordinator().Next(v1::WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().exit().exit_code(), 0);
  const std::string log = ReadFile(AttemptDir("leaver") + "/rank-0.log");
  ASSERT_EQ(log.rfind("child=", 0), 0u) << log;
  const pid_t child = std::stoi(log.substr(6));
  EXPECT_TRUE(PollUntil([&] { return !Alive(child); })) << "child " << child << " survived";
}

constexpr const char* kMetricsScript = R"PY(
import os, socket, subprocess, sys
path = os.environ["CONVOY_METRICS_SOCKET"]
def send(data, **kw):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(data)
    s.close()
send(b'{"kind":"step","step":1,"loss":0.5,"rank":1}\n'
     b'garbage\n[1,2]\n' + b'{"pad":"' + b'x' * 70000 + b'"}\n'
     b'{"step":2,"samples":64,"samples_per_s":12.5}\n'
     b'{"step":5,"rank":7}\n{"step":99')
# A child in the rank's process group is identified as the rank too, while it lives (it
# waits for the worker to read its record and close: a peer that is gone cannot be told).
subprocess.run([sys.executable, "-c", "import socket,os; s=socket.socket(socket.AF_UNIX); "
                "s.connect(os.environ['CONVOY_METRICS_SOCKET']); s.sendall(b'{\"step\":3}\\n'); "
                "s.shutdown(socket.SHUT_WR); s.recv(1)"],
               check=True)
# One in a session of its own cannot be: it is refused, whatever its records say.
# (The worker may close the connection before the write: that is no error here.)
subprocess.run([sys.executable, "-c", "import socket,os; s=socket.socket(socket.AF_UNIX); "
                "s.connect(os.environ['CONVOY_METRICS_SOCKET'])\n"
                "try: s.sendall(b'{\"step\":4,\"rank\":1}\\n')\n"
                "except OSError: pass"],
               check=True, start_new_session=True)
)PY";

TEST_F(SupervisorProcessesTest, MetricsSocketRoundTripIdentifiesRanksByPeerCredentials) {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << "needs " << kPython;
  Start();
  Connect();
  Launch("metrics", {kPython, "-c", kMetricsScript}, /*group_rank=*/1, /*nodes=*/2);
  auto exited = coordinator().Next(v1::WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  ASSERT_EQ(exited->process_exited().exit().exit_code(), 0)
      << exited->process_exited().exit().stderr_tail_size();
  std::vector<v1::MetricRecord> records;
  ASSERT_TRUE(PollUntil([&] {
    records = coordinator().metric_records();
    return records.size() >= 3;
  })) << records.size()
      << " records; log: " << ReadFile(AttemptDir("metrics") + "/rank-1.log");
  std::map<int64_t, v1::MetricRecord> by_step;
  for (const auto& r : records) by_step[r.step()] = r;
  ASSERT_EQ(by_step.size(), 3u);
  EXPECT_EQ(by_step[1].rank(), 1);  // its "rank" agrees with SO_PEERCRED's
  EXPECT_EQ(by_step[1].kind(), "step");
  EXPECT_DOUBLE_EQ(by_step[1].loss(), 0.5);
  EXPECT_EQ(by_step[2].rank(), 1);
  EXPECT_EQ(by_step[2].samples(), 64);
  EXPECT_DOUBLE_EQ(by_step[2].values().at("samples_per_s"), 12.5);
  EXPECT_EQ(by_step[3].rank(), 1);  // the rank's child, by its process group
  EXPECT_EQ(by_step.count(5), 0u) << "a record that claims another rank must be dropped";
  EXPECT_EQ(by_step.count(4), 0u) << "a peer that is no rank must be refused";
  for (const auto& r : records) {
    EXPECT_EQ(r.attempt(), 0);
    EXPECT_GT(r.time_unix_ms(), 0);
  }
  // garbage, [1,2], the long line, the claim of rank 7, the stranger, the truncated line.
  EXPECT_EQ(worker_->supervisor().counters().records_dropped, 6);
  // The socket file went with the attempt.
  EXPECT_FALSE(std::filesystem::exists(dir_ / "run/metrics.0.sock"));
}

// Issue 18: the socket belongs to the ranks' user, 0600, and a process of another uid that
// connects anyway (root can) is refused. Needs root, to run the rank as `nobody`.
TEST_F(SupervisorProcessesTest, MetricsSocketRefusesAnotherUid) {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << "needs " << kPython;
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run the rank as another user";
  auto nobody = LookupUser("nobody");
  ASSERT_TRUE(nobody.ok()) << nobody.status().message();
  flags_.run_as = "nobody";
  flags_.allow_root_jobs = false;
  Start();
  Connect();
  Launch("uid",
         {kPython, "-c",
          "import os, socket, time\n"
          "s = socket.socket(socket.AF_UNIX); s.connect(os.environ['CONVOY_METRICS_SOCKET'])\n"
          "s.sendall(b'{\"step\":1}\\n')\n"
          "while not os.path.exists(os.environ['CONVOY_CHECKPOINT_DIR'] + '/../go'):\n"
          "    time.sleep(0.02)\n"
          "s.sendall(b'{\"step\":2}\\n')\n"});
  std::vector<v1::MetricRecord> records;
  ASSERT_TRUE(PollUntil([&] {
    records = coordinator().metric_records();
    return !records.empty();
  })) << ReadFile(AttemptDir("uid") + "/rank-0.log");
  const std::string sock = dir_.string() + "/run/uid.0.sock";
  struct stat st {};
  ASSERT_EQ(stat(sock.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, nobody->uid);
  // This test runs as root (uid 0), another uid than the ranks': refused.
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string fake = "{\"step\":9,\"rank\":0}\n";
  // The worker may have closed it already (EPIPE): no SIGPIPE, and either way nothing gets in.
  (void)!send(fd, fake.data(), fake.size(), MSG_NOSIGNAL);
  char byte;
  EXPECT_LE(read(fd, &byte, 1), 0) << "the worker should have closed the connection";
  close(fd);
  std::ofstream(dir_.string() + "/job-root/uid/go") << "";
  auto exited = coordinator().Next(v1::WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().exit().exit_code(), 0)
      << ReadFile(AttemptDir("uid") + "/rank-0.log");
  ASSERT_TRUE(PollUntil([&] { return coordinator().metric_records().size() >= 2; }));
  for (const auto& r : coordinator().metric_records())
    EXPECT_NE(r.step(), 9) << "a record of uid 0 got in";
  // The rank's log is its user's and private.
  ASSERT_EQ(stat((AttemptDir("uid") + "/rank-0.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, nobody->uid);
}

TEST_F(SupervisorProcessesTest, MetricsWaitForTheCoordinatorAndExitsTravelInRegister) {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << "needs " << kPython;
  server_.reset();  // no coordinator yet: its port is kept for later
  Start();
  Launch("offline", {kPython, "-c",
                     "import socket,os; s=socket.socket(socket.AF_UNIX); "
                     "s.connect(os.environ['CONVOY_METRICS_SOCKET']); "
                     "s.sendall(b'{\"step\":1}\\n{\"step\":2}\\n{\"step\":3}\\n')"});
  v1::Register reg;
  ASSERT_TRUE(PollUntil([&] {
    reg = worker_->supervisor().BuildRegister();
    return reg.attempts_size() == 1 && !reg.attempts(0).ranks(0).running();
  }));
  EXPECT_EQ(reg.attempts(0).ranks(0).exit().exit_code(), 0);
  StartServer(port_);  // the connection's backoff finds it
  auto registered = coordinator().Next(v1::WorkerMessage::kRegister, 30s);
  ASSERT_TRUE(registered.has_value());
  ASSERT_EQ(registered->register_().attempts_size(), 1);  // the exit travels in Register
  EXPECT_EQ(registered->register_().attempts(0).ranks(0).exit().exit_code(), 0);
  auto batch = coordinator().Next(v1::WorkerMessage::kMetrics);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->metrics().job_id(), "offline");
  ASSERT_EQ(batch->metrics().records_size(), 3);
  EXPECT_EQ(batch->metrics().records(2).step(), 3);
}

}  // namespace worker_supervisor_processes_test
}  // namespace convoy

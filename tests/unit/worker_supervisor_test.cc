// The supervisor's decisions with a fake launcher, a fake outbox and a fake clock: what it
// launches and refuses, how it kills (grace, then SIGKILL), what it reports and when
// (Register snapshots, resynchronisation after a reconnect), the orphan timeout.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/code_archive.h"
#include "common/job_paths.h"
#include "common/pki.h"
#include "worker/supervise/supervisor.h"

namespace convoy {
namespace worker_supervisor_test {

using namespace std::chrono_literals;

class FakeLauncher : public ProcessLauncher {
 public:
  FakeLauncher() : wake_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~FakeLauncher() override { close(wake_); }
  StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++launching_;
    gate_cv_.notify_all();
    gate_cv_.wait(lock, [this] { return !gated_; });  // a fork that takes its time
    --launching_;
    requests_.push_back(request);
    if (request.argv[0] == "cannot-exec") {
      return Status::FailedPrecondition("exec cannot-exec: No such file or directory");
    }
    LaunchedProcess p;
    p.pid = next_pid_++;
    live_.insert(p.pid);
    return p;
  }
  void SignalGroup(pid_t pgid, int signal) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (on_signal) on_signal(pgid, signal);
    signals_.emplace_back(pgid, signal);
    if (die_on_signal_ && live_.erase(pgid) != 0) {
      exits_.push_back({pgid, signal});
      Wake();
    }
  }
  bool IsStopped(pid_t pid) override {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_.count(pid) > 0;
  }
  void SetStopped(pid_t pid) {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_.insert(pid);
  }
  // While closed, Launch blocks (as a slow fork or exec would).
  void CloseGate() {
    std::lock_guard<std::mutex> lock(mu_);
    gated_ = true;
  }
  void OpenGate() {
    std::lock_guard<std::mutex> lock(mu_);
    gated_ = false;
    gate_cv_.notify_all();
  }
  // Waits until a Launch is blocked at the gate.
  bool WaitLaunching() {
    std::unique_lock<std::mutex> lock(mu_);
    return gate_cv_.wait_for(lock, 5s, [this] { return launching_ > 0; });
  }
  // From now on a signalled process dies of it at once.
  void DieOnSignal() {
    std::lock_guard<std::mutex> lock(mu_);
    die_on_signal_ = true;
  }
  std::vector<ReapedProcess> PollExits() override {
    uint64_t ignored = 0;
    while (read(wake_, &ignored, sizeof(ignored)) > 0) {
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ReapedProcess> out(exits_.begin(), exits_.end());
    exits_.clear();
    ++polls_;
    cv_.notify_all();
    return out;
  }
  // Exits are events, as a real launcher's pidfds are: the supervisor waits on this one.
  int ExitWakeFds(std::vector<int>* fds) override {
    fds->push_back(wake_);
    return -1;
  }

  // The process `pid` ends with `wait_status`; returns once the supervisor has handled it.
  void Exit(pid_t pid, int wait_status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_.erase(pid);
      exits_.push_back({pid, wait_status});
    }
    Poke();
  }
  // Wakes the supervisor (as an exit would) and returns once it has finished a whole turn
  // after that: a test that advanced the fake clock lets it see the time.
  void Poke() {
    int64_t polls;
    {
      std::lock_guard<std::mutex> lock(mu_);
      polls = polls_;
    }
    Wake();
    // The turn that polled after the wake-up took what was queued; once the one after it
    // has polled too, the first has been handled entirely.
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, 5s, [&] { return exits_.empty() && polls_ >= polls + 1; })) {
      ADD_FAILURE() << "the supervisor did not poll for exits";
      return;
    }
    polls = polls_;
    lock.unlock();
    Wake();
    lock.lock();
    if (!cv_.wait_for(lock, 5s, [&] { return polls_ >= polls + 1; })) {
      ADD_FAILURE() << "the supervisor did not take another turn";
    }
  }
  std::vector<LaunchRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // Called (on the supervisor thread) as each signal is sent; set before Start.
  std::function<void(pid_t, int)> on_signal;
  int CountSignals(pid_t pgid, int signal) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& [p, s] : signals_) n += (p == pgid && s == signal) ? 1 : 0;
    return n;
  }

 private:
  std::mutex mu_;
  pid_t next_pid_ = 1000;
  std::vector<LaunchRequest> requests_;
  std::vector<std::pair<pid_t, int>> signals_;
  std::deque<ReapedProcess> exits_;
  std::set<pid_t> stopped_;
  std::set<pid_t> live_;
  bool die_on_signal_ = false;
  int64_t polls_ = 0;
  std::condition_variable gate_cv_;
  bool gated_ = false;
  int launching_ = 0;
  std::condition_variable cv_;  // polls_ moved
  const int wake_;
  void Wake() {
    const uint64_t one = 1;
    ssize_t ignored = write(wake_, &one, sizeof(one));
    (void)ignored;
  }
};

class FakeOutbox : public Outbox {
 public:
  bool Send(const v1::WorkerMessage& msg) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!up_) return false;
    sent_.push_back(msg);
    cv_.notify_all();
    return true;
  }
  void SetUp(bool up) {
    std::lock_guard<std::mutex> lock(mu_);
    up_ = up;
  }
  // How many messages sent so far match `pred` (none removed).
  size_t Count(const std::function<bool(const v1::WorkerMessage&)>& pred) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& m : sent_) n += pred(m) ? 1 : 0;
    return n;
  }
  // Waits (up to 5 s) for a message matching `pred` and returns it (removing it and every
  // message before it).
  std::optional<v1::WorkerMessage> WaitFor(
      const std::function<bool(const v1::WorkerMessage&)>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<v1::WorkerMessage> found;
    cv_.wait_for(lock, 5s, [&] {
      for (size_t i = 0; i < sent_.size(); ++i) {
        if (pred(sent_[i])) {
          found = sent_[i];
          sent_.erase(sent_.begin(), sent_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
          return true;
        }
      }
      return false;
    });
    return found;
  }
  int Count(v1::WorkerMessage::MsgCase c) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& m : sent_) n += m.msg_case() == c ? 1 : 0;
    return n;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool up_ = true;
  std::deque<v1::WorkerMessage> sent_;
};

auto Is(v1::WorkerMessage::MsgCase c) {
  return [c](const v1::WorkerMessage& m) { return m.msg_case() == c; };
}

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("convoy-sup-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    config_.name = "w1";
    config_.address = "127.0.0.1";
    config_.work_dir = dir_.string();
    config_.trainer_path = "/nonexistent/convoy-trainer";
    config_.cores = 4;
    config_.slots = 2;
    config_.kill_grace_ms = 3000;
    config_.orphan_timeout_ms = 60000;
    config_.env = {{"PATH", "/usr/bin:/bin"}};
  }
  void TearDown() override {
    launcher_.DieOnSignal();  // ranks still "running" die on the teardown's SIGTERM
    sup_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Start() {
    sup_ = std::make_unique<Supervisor>(config_, launcher_, outbox_, clock_);
    sup_->Start();
  }
  // Register + ack, as the connection does.
  v1::Register Connect() {
    v1::Register reg = sup_->BuildRegister();
    outbox_.SetUp(true);
    sup_->OnConnected(1000);
    return reg;
  }
  void Disconnect() {
    outbox_.SetUp(false);
    sup_->OnDisconnected();
  }
  static v1::CoordinatorMessage LaunchMsg(const std::string& job, int attempt, int group_rank,
                                          int lws, std::vector<std::string> command) {
    v1::CoordinatorMessage m;
    v1::Launch* l = m.mutable_launch();
    l->set_job_id(job);
    l->set_attempt(attempt);
    l->set_group_rank(group_rank);
    l->set_num_nodes(2);
    l->set_local_world_size(lws);
    l->set_world_size(2 * lws);
    for (int i = 0; i < lws; ++i) l->add_ranks(group_rank * lws + i);
    l->set_master_addr("127.0.0.1");
    l->set_master_port(29500);
    l->set_run_id(job);
    for (auto& c : command) l->mutable_spec()->add_command(c);
    return m;
  }
  static v1::CoordinatorMessage KillMsg(const std::string& job, int attempt, int grace_ms) {
    v1::CoordinatorMessage m;
    m.mutable_kill()->set_job_id(job);
    m.mutable_kill()->set_attempt(attempt);
    m.mutable_kill()->set_grace_ms(grace_ms);
    return m;
  }
  // Launches `lws` ranks of job j attempt 0 on node 1 and returns their pids.
  std::vector<pid_t> LaunchTwo() {
    sup_->Post(LaunchMsg("j", 0, 1, 2, {"train", "--fast"}));
    std::vector<pid_t> pids;
    for (int i = 0; i < 2; ++i) {
      auto m = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessStarted));
      EXPECT_TRUE(m.has_value());
      if (!m) return pids;
      EXPECT_EQ(m->process_started().rank(), 2 + i);
      EXPECT_EQ(m->process_started().local_rank(), i);
      pids.push_back(m->process_started().pid());
    }
    return pids;
  }

  std::filesystem::path dir_;
  WorkerConfig config_;
  FakeLauncher launcher_;
  FakeOutbox outbox_;
  FakeClock clock_;
  std::unique_ptr<Supervisor> sup_;
};

TEST_F(SupervisorTest, LaunchStartsEveryLocalRankWithItsEnvironment) {
  Start();
  Connect();
  LaunchTwo();
  auto reqs = launcher_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  const std::string attempt_dir = dir_.string() + "/jobs/j/attempt-0";  // logs
  const std::string job_dir = dir_.string() + "/job-root/j";            // the job's own (issue 12)
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(reqs[i].argv, (std::vector<std::string>{"train", "--fast"}));
    EXPECT_EQ(reqs[i].working_dir, job_dir);
    EXPECT_EQ(reqs[i].env.at("RANK"), std::to_string(2 + i));
    EXPECT_EQ(reqs[i].env.at("PATH"), "/usr/bin:/bin");
    EXPECT_EQ(reqs[i].env.at("OMP_NUM_THREADS"), "2");
    EXPECT_EQ(reqs[i].env.at("CONVOY_CHECKPOINT_DIR"), job_dir + "/checkpoints");
    EXPECT_EQ(reqs[i].env.at("CONVOY_METRICS_SOCKET"), dir_.string() + "/run/j.0.sock");
  }
  EXPECT_TRUE(std::filesystem::is_directory(job_dir + "/checkpoints"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "run/j.0.sock"));
  EXPECT_TRUE(std::filesystem::exists(attempt_dir + "/rank-2.log"));
  // A repeated Launch changes nothing.
  sup_->Post(LaunchMsg("j", 0, 1, 2, {"train", "--fast"}));
  sup_->Post(KillMsg("nope", 9, 0));  // an unknown attempt: ignored
  auto reg = sup_->BuildRegister();
  EXPECT_EQ(launcher_.requests().size(), 2u);
  ASSERT_EQ(reg.attempts_size(), 1);
  EXPECT_EQ(reg.attempts(0).ranks_size(), 2);
  EXPECT_TRUE(reg.attempts(0).ranks(1).running());
  EXPECT_EQ(reg.name(), "w1");
  EXPECT_EQ(reg.slots(), 2);
  EXPECT_EQ(reg.version(), CONVOY_VERSION);
}

TEST_F(SupervisorTest, BadLaunchesAreRefusedWithLaunchFailed) {
  Start();
  Connect();
  struct Case {
    v1::CoordinatorMessage msg;
    std::string expect;
  };
  std::vector<Case> cases;
  cases.push_back({LaunchMsg("j", 0, 0, 1, {}), "empty command"});
  cases.push_back({LaunchMsg("j", 0, 0, 0, {"x"}), "local_world_size 0"});
  cases.push_back({LaunchMsg("j", 0, 0, 9, {"x"}), "local_world_size 9"});  // > slots * 4
  cases.push_back({LaunchMsg("../etc", 0, 0, 1, {"x"}), "invalid job id"});
  cases.push_back({LaunchMsg("j", -1, 0, 1, {"x"}), "invalid job id"});
  cases.push_back({LaunchMsg("j", 0, 5, 1, {"x"}), "inconsistent rank plan"});
  v1::CoordinatorMessage no_ranks = LaunchMsg("j", 0, 0, 1, {"x"});
  no_ranks.mutable_launch()->clear_ranks();
  cases.push_back({no_ranks, "launch.ranks: 0 ranks for local_world_size 1"});
  v1::CoordinatorMessage outside = LaunchMsg("j", 0, 0, 1, {"x"});
  outside.mutable_launch()->set_ranks(0, 7);
  cases.push_back({outside, "launch.ranks[0]: rank 7 is out of the world of 2"});
  v1::CoordinatorMessage twice = LaunchMsg("j", 0, 0, 2, {"x"});
  twice.mutable_launch()->set_ranks(1, 0);
  cases.push_back({twice, "launch.ranks[1]: rank 0"});
  v1::CoordinatorMessage trainer = LaunchMsg("j", 0, 0, 1, {});
  trainer.mutable_launch()->mutable_spec()->mutable_trainer()->set_model("mlp");
  cases.push_back({trainer, "convoy-trainer not found at /nonexistent/convoy-trainer"});
  for (const Case& c : cases) {
    sup_->Post(c.msg);
    auto m = outbox_.WaitFor(Is(v1::WorkerMessage::kLaunchFailed));
    ASSERT_TRUE(m.has_value()) << c.expect;
    EXPECT_NE(m->launch_failed().error().find(c.expect), std::string::npos)
        << m->launch_failed().error();
  }
  // Unknown message kinds are ignored too.
  sup_->Post(v1::CoordinatorMessage());
  EXPECT_TRUE(launcher_.requests().empty());
  EXPECT_EQ(sup_->BuildRegister().attempts_size(), 0);
}

TEST_F(SupervisorTest, RegisterCarriesTheMachinesResourcesAndLabels) {
  config_.memory_bytes = int64_t{64} << 30;
  config_.gpus = {0, 2};
  config_.gpu_devices = {{0, "NVIDIA H100 80GB HBM3", int64_t{80} << 30, "GPU-a"}, {2, "", 0, ""}};
  config_.labels = {{"zone", "a"}, {"gpu", "h100"}};
  Start();
  const v1::Register reg = sup_->BuildRegister();
  EXPECT_EQ(reg.cores(), 4);
  EXPECT_EQ(reg.memory_bytes(), int64_t{64} << 30);
  ASSERT_EQ(reg.gpus_size(), 2);
  EXPECT_EQ(reg.gpus(1), 2);
  ASSERT_EQ(reg.gpu_devices_size(), 2);
  EXPECT_EQ(reg.gpu_devices(0).model(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(reg.gpu_devices(0).memory_bytes(), int64_t{80} << 30);
  EXPECT_EQ(reg.gpu_devices(0).uuid(), "GPU-a");
  EXPECT_EQ(reg.gpu_devices(1).index(), 2);
  EXPECT_EQ(reg.labels().at("zone"), "a");
  EXPECT_EQ(reg.labels().at("gpu"), "h100");
}

TEST_F(SupervisorTest, RegisterNeverWaitsForAForkInProgress) {
  Start();
  Connect();
  launcher_.CloseGate();
  sup_->Post(LaunchMsg("j", 0, 0, 1, {"x"}));
  ASSERT_TRUE(launcher_.WaitLaunching());
  // The supervisor thread is inside Launch (a fork); a reconnecting connection thread still
  // gets its Register at once, from the last snapshot (which does not hold the attempt yet).
  auto reg = std::async(std::launch::async, [this] { return sup_->BuildRegister(); });
  const bool ready = reg.wait_for(5s) == std::future_status::ready;
  const int attempts = ready ? reg.get().attempts_size() : -1;
  launcher_.OpenGate();
  ASSERT_TRUE(ready) << "BuildRegister waited for the fork";
  EXPECT_EQ(attempts, 0);
  ASSERT_TRUE(outbox_.WaitFor(Is(v1::WorkerMessage::kProcessStarted)).has_value());
  // Once the start is reported, the snapshot has it.
  EXPECT_EQ(sup_->BuildRegister().attempts_size(), 1);
}

TEST_F(SupervisorTest, ALaunchOfAnotherJobWithTheSameIdNeverLandsOnItsAttempt) {
  Start();
  Connect();
  auto launch = [](const std::string& uid) {
    v1::CoordinatorMessage m = LaunchMsg("j-000001", 0, 0, 1, {"x"});
    m.mutable_launch()->set_job_uid(uid);
    return m;
  };
  const std::string a(32, 'a'), b(32, 'b');
  sup_->Post(launch(a));
  auto started = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessStarted));
  ASSERT_TRUE(started.has_value());
  const pid_t pid = started->process_started().pid();
  // The same id and attempt of another job (another cluster's): not ignored as a repeat, not
  // run beside it: refused while the old one is stopped.
  sup_->Post(launch(b));
  auto refused = outbox_.WaitFor(Is(v1::WorkerMessage::kLaunchFailed));
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->launch_failed().error().find("another job with the same id (uid " + a),
            std::string::npos)
      << refused->launch_failed().error();
  EXPECT_EQ(launcher_.CountSignals(pid, SIGTERM), 1);
  launcher_.Exit(pid, SIGTERM);
  ASSERT_TRUE(outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited)).has_value());
  // Once it ended, the new job's launch replaces it; the same job's repeat is ignored.
  sup_->Post(launch(b));
  ASSERT_TRUE(outbox_.WaitFor(Is(v1::WorkerMessage::kProcessStarted)).has_value());
  sup_->Post(launch(b));
  launcher_.Poke();
  EXPECT_EQ(outbox_.Count(v1::WorkerMessage::kProcessStarted), 0);
  EXPECT_EQ(launcher_.requests().size(), 2u);
}

TEST_F(SupervisorTest, AnAttemptIsKeyedByItsJobUidInEveryMessage) {
  Start();
  Connect();
  const std::string a(32, 'a'), b(32, 'b');
  v1::CoordinatorMessage launch = LaunchMsg("j-000001", 0, 0, 1, {"x"});
  launch.mutable_launch()->set_job_uid(a);
  sup_->Post(launch);
  auto started = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessStarted));
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->process_started().job_uid(), a);
  const pid_t pid = started->process_started().pid();
  auto reg = sup_->BuildRegister();
  ASSERT_EQ(reg.attempts_size(), 1);
  EXPECT_EQ(reg.attempts(0).job_uid(), a);

  // Another job's Kill and ForgetAttempt with the same id and attempt touch nothing here.
  v1::CoordinatorMessage kill = KillMsg("j-000001", 0, 1000);
  kill.mutable_kill()->set_job_uid(b);
  sup_->Post(kill);
  v1::CoordinatorMessage forget;
  forget.mutable_forget_attempt()->set_job_id("j-000001");
  forget.mutable_forget_attempt()->set_attempt(0);
  forget.mutable_forget_attempt()->set_job_uid(b);
  sup_->Post(forget);
  // Its port request is its own: another port, answered with its uid.
  auto reserve = [](const std::string& uid) {
    v1::CoordinatorMessage m;
    m.mutable_reserve_port()->set_job_id("j-000001");
    m.mutable_reserve_port()->set_attempt(0);
    m.mutable_reserve_port()->set_job_uid(uid);
    return m;
  };
  sup_->Post(reserve(b));
  auto port_b = outbox_.WaitFor(Is(v1::WorkerMessage::kPortReserved));
  ASSERT_TRUE(port_b.has_value());
  EXPECT_EQ(port_b->port_reserved().job_uid(), b);
  sup_->Post(reserve(a));
  auto port_a = outbox_.WaitFor(Is(v1::WorkerMessage::kPortReserved));
  ASSERT_TRUE(port_a.has_value());
  EXPECT_EQ(port_a->port_reserved().job_uid(), a);
  EXPECT_NE(port_a->port_reserved().port(), port_b->port_reserved().port());
  EXPECT_EQ(launcher_.CountSignals(pid, SIGTERM), 0);

  // Its own Kill stops it; its exit names its uid and it is still reported (not forgotten).
  kill.mutable_kill()->set_job_uid(a);
  sup_->Post(kill);
  for (int i = 0; i < 5000 && launcher_.CountSignals(pid, SIGTERM) == 0; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(launcher_.CountSignals(pid, SIGTERM), 1);
  launcher_.Exit(pid, SIGTERM);
  auto exited = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited));
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().job_uid(), a);
  reg = sup_->BuildRegister();
  ASSERT_EQ(reg.attempts_size(), 1);
  EXPECT_EQ(reg.attempts(0).job_uid(), a);
}

// Limits are enforced or the job does not run: a worker without cgroups refuses a rank that
// asks for memory or cores, naming the field and why, and starts nothing.
TEST_F(SupervisorTest, WithoutCgroupsALaunchThatSetsLimitsIsRefused) {
  config_.cgroups_missing = "no cgroup hierarchy";
  Start();
  Connect();
  for (const bool memory : {true, false}) {
    v1::CoordinatorMessage launch = LaunchMsg("j-" + std::to_string(memory), 0, 0, 1, {"x"});
    v1::RankResources* res = launch.mutable_launch()->add_resources();
    if (memory) res->set_memory_bytes(int64_t{256} << 20);
    if (!memory) res->set_cpus(2);
    sup_->Post(launch);
    auto refused = outbox_.WaitFor(Is(v1::WorkerMessage::kLaunchFailed));
    ASSERT_TRUE(refused.has_value());
    EXPECT_EQ(refused->launch_failed().error().rfind(
                  std::string(memory ? "memory_per_proc" : "cpus_per_proc") +
                      ": worker w1 cannot enforce limits (no cgroup hierarchy)",
                  0),
              0u)
        << refused->launch_failed().error();
  }
  EXPECT_TRUE(launcher_.requests().empty());
}

TEST_F(SupervisorTest, ExecFailureIsReportedAndRemembered) {
  Start();
  Connect();
  sup_->Post(LaunchMsg("j", 0, 0, 1, {"cannot-exec"}));
  auto m = outbox_.WaitFor(Is(v1::WorkerMessage::kLaunchFailed));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->launch_failed().rank(), 0);
  EXPECT_NE(m->launch_failed().error().find("No such file"), std::string::npos);
  auto reg = sup_->BuildRegister();
  ASSERT_EQ(reg.attempts_size(), 1);
  EXPECT_FALSE(reg.attempts(0).ranks(0).running());
  EXPECT_EQ(reg.attempts(0).ranks(0).exit().exit_code(), 127);
  // Nothing runs: the socket is closed in the same turn of the supervisor, which Register no
  // longer waits for.
  for (int i = 0; i < 5000 && std::filesystem::exists(dir_ / "run/j.0.sock"); ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "run/j.0.sock"));
}

TEST_F(SupervisorTest, ExitIsReportedWithCodeOrSignal) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  ASSERT_EQ(pids.size(), 2u);
  launcher_.Exit(pids[0], W_EXITCODE(3, 0));
  auto m = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->process_exited().rank(), 2);
  EXPECT_EQ(m->process_exited().pid(), pids[0]);
  EXPECT_EQ(m->process_exited().exit().exit_code(), 3);
  EXPECT_FALSE(m->process_exited().exit().killed_by_worker());
  // The rest of its process group is killed after the leader ended.
  EXPECT_EQ(launcher_.CountSignals(pids[0], SIGKILL), 1);
  launcher_.Exit(pids[1], SIGSEGV);
  m = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->process_exited().exit().signal(), SIGSEGV);
  EXPECT_EQ(m->process_exited().exit().signal_name(), "SIGSEGV");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "run/j.0.sock"));  // removed with the attempt
}

TEST_F(SupervisorTest, KillSendsTermThenKillAfterTheGrace) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  ASSERT_EQ(pids.size(), 2u);
  sup_->Post(KillMsg("j", 0, 2000));
  // The supervisor thread handles it on its next turn.
  for (int i = 0; i < 500 && launcher_.CountSignals(pids[1], SIGTERM) == 0; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(launcher_.CountSignals(pids[0], SIGTERM), 1);
  EXPECT_EQ(launcher_.CountSignals(pids[1], SIGTERM), 1);
  EXPECT_EQ(launcher_.CountSignals(pids[1], SIGKILL), 0);
  launcher_.Exit(pids[0], SIGTERM);  // rank 2 obeys
  clock_.AdvanceMs(1999);
  launcher_.Exit(9999, 0);  // (an unknown pid: ignored) lets a few turns pass
  EXPECT_EQ(launcher_.CountSignals(pids[1], SIGKILL), 0);
  clock_.AdvanceMs(1);
  launcher_.Poke();
  for (int i = 0; i < 500 && launcher_.CountSignals(pids[1], SIGKILL) == 0; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(launcher_.CountSignals(pids[1], SIGKILL), 1);
  EXPECT_EQ(launcher_.CountSignals(pids[0], SIGKILL), 1);  // only the after-exit sweep
  launcher_.Exit(pids[1], SIGKILL);
  auto first = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited));
  auto second = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited));
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->process_exited().exit().signal_name(), "SIGTERM");
  EXPECT_TRUE(first->process_exited().exit().killed_by_worker());
  EXPECT_EQ(second->process_exited().exit().signal_name(), "SIGKILL");
  EXPECT_TRUE(second->process_exited().exit().killed_by_worker());
  // Idempotent: a second Kill of the ended attempt signals nothing.
  sup_->Post(KillMsg("j", 0, 0));
  launcher_.Exit(9998, 0);
  EXPECT_EQ(launcher_.CountSignals(pids[1], SIGTERM), 1);
}

TEST_F(SupervisorTest, APreemptingKillWritesItsReasonBeforeTheSigtermAndSnapshotsStay) {
  config_.snapshot_root = (dir_ / "shm").string();
  const std::string preempt_file = dir_.string() + "/jobs/j/attempt-0/preempt";
  std::vector<bool> file_there_at_sigterm;
  launcher_.on_signal = [&](pid_t, int signal) {
    if (signal == SIGTERM) file_there_at_sigterm.push_back(std::filesystem::exists(preempt_file));
  };
  Start();
  Connect();
  auto pids = LaunchTwo();
  ASSERT_EQ(pids.size(), 2u);
  const std::string snapshots = config_.snapshot_root + "/j";
  for (const LaunchRequest& r : launcher_.requests()) {
    EXPECT_EQ(r.env.at("CONVOY_SNAPSHOT_DIR"), snapshots);
    EXPECT_EQ(r.env.at("CONVOY_PREEMPT_FILE"), preempt_file);
  }
  EXPECT_TRUE(std::filesystem::is_directory(snapshots));
  EXPECT_EQ(std::filesystem::status(snapshots).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  EXPECT_FALSE(std::filesystem::exists(preempt_file));  // a plain SIGTERM is no preemption

  v1::CoordinatorMessage kill = KillMsg("j", 0, 30000);
  kill.mutable_kill()->set_preempt(true);
  kill.mutable_kill()->set_reason("preempted by j-000009");
  sup_->Post(kill);
  for (int i = 0; i < 500 && launcher_.CountSignals(pids[1], SIGTERM) == 0; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  launcher_.Exit(pids[0], 0);
  launcher_.Exit(pids[1], 0);
  EXPECT_EQ(file_there_at_sigterm, (std::vector<bool>{true, true}));
  std::ifstream in(preempt_file);
  std::string reason;
  std::getline(in, reason);
  EXPECT_EQ(reason, "preempted by j-000009");
  // The job's next attempt finds its snapshots; they go when the job has finished.
  EXPECT_TRUE(std::filesystem::is_directory(snapshots));
  v1::CoordinatorMessage finished;
  finished.mutable_job_finished()->set_job_id("j");
  sup_->Post(finished);
  for (int i = 0; i < 500 && std::filesystem::exists(snapshots); ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_FALSE(std::filesystem::exists(snapshots));
}

// Job ids repeat across clusters: a job's snapshots live under its cluster id and uid, never
// in another cluster's directory of the same job id, and only its own go when it finishes.
TEST_F(SupervisorTest, SnapshotsAreKeyedByClusterAndJobUidNotByJobId) {
  config_.snapshot_root = (dir_ / "shm").string();
  const std::string kCluster = "fedcba9876543210fedcba9876543210";
  const std::string kUid = "0123456789abcdef0123456789abcdef";
  // Another cluster's job "j" (or an older worker's), killed -9 with its snapshots left.
  const std::string foreign = config_.snapshot_root + "/j";
  std::filesystem::create_directories(foreign);
  { std::ofstream(foreign + "/snap-000000000170.bin") << "another job's"; }
  Start();
  Connect();
  v1::CoordinatorMessage launch = LaunchMsg("j", 0, 1, 2, {"train", "--fast"});
  launch.mutable_launch()->set_cluster_id(kCluster);
  launch.mutable_launch()->set_job_uid(kUid);
  sup_->Post(launch);
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    auto m = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessStarted));
    ASSERT_TRUE(m.has_value());
    pids.push_back(m->process_started().pid());
  }
  const std::string own = config_.snapshot_root + "/" + kCluster + "-" + kUid;
  for (const LaunchRequest& r : launcher_.requests()) {
    EXPECT_EQ(r.env.at("CONVOY_SNAPSHOT_DIR"), own);
    EXPECT_EQ(r.env.at("CONVOY_JOB_UID"), kUid);
    EXPECT_EQ(r.env.at("CONVOY_CLUSTER_ID"), kCluster);
    // Its directories are named by id and uid: never another j's.
    const std::string job_root = *CanonicalPath(dir_.string() + "/job-root");
    EXPECT_EQ(r.working_dir, job_root + "/j-" + kUid);
    EXPECT_EQ(r.env.at("CONVOY_CHECKPOINT_DIR"), job_root + "/j-" + kUid + "/checkpoints");
    EXPECT_EQ(r.env.at("TORCHELASTIC_ERROR_FILE")
                  .rfind(dir_.string() + "/jobs/j-" + kUid + "/attempt-0/", 0),
              0u)
        << r.env.at("TORCHELASTIC_ERROR_FILE");
  }
  EXPECT_TRUE(std::filesystem::is_directory(own));
  // A reconnect that calls its directory stale (the coordinator cannot know it runs here)
  // never takes it from a running rank; another cluster's directory of the same job id goes.
  EXPECT_EQ(sup_->BuildRegister().snapshot_keys_size(), 2);
  sup_->OnConnected(1000, {own.substr(own.rfind('/') + 1), "j"});
  for (int i = 0; i < 500 && std::filesystem::exists(foreign); ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_FALSE(std::filesystem::exists(foreign)) << "the stale directory was not removed";
  EXPECT_TRUE(std::filesystem::is_directory(own)) << "a running rank's snapshots were removed";
  std::filesystem::create_directories(foreign);
  { std::ofstream(foreign + "/snap-000000000170.bin") << "another job's"; }
  launcher_.Exit(pids[0], 0);
  launcher_.Exit(pids[1], 0);
  v1::CoordinatorMessage finished;
  finished.mutable_job_finished()->set_job_id("j");
  finished.mutable_job_finished()->set_cluster_id(kCluster);
  finished.mutable_job_finished()->set_job_uid(kUid);
  sup_->Post(finished);
  for (int i = 0; i < 500 && std::filesystem::exists(own); ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_FALSE(std::filesystem::exists(own));
  EXPECT_TRUE(std::filesystem::exists(foreign + "/snap-000000000170.bin"))
      << "another cluster's snapshots of the same job id were removed";
}

TEST_F(SupervisorTest, KillWithoutGraceUsesTheWorkersDefault) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  sup_->Post(KillMsg("j", 0, 0));
  for (int i = 0; i < 500 && launcher_.CountSignals(pids[0], SIGTERM) == 0; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  clock_.AdvanceMs(config_.kill_grace_ms - 1);
  launcher_.Exit(9999, 0);
  EXPECT_EQ(launcher_.CountSignals(pids[0], SIGKILL), 0);
  clock_.AdvanceMs(1);
  launcher_.Poke();
  for (int i = 0; i < 500 && launcher_.CountSignals(pids[0], SIGKILL) == 0; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(launcher_.CountSignals(pids[0], SIGKILL), 1);
}

TEST_F(SupervisorTest, ExitsWhileDisconnectedTravelInTheNextRegisterOnly) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  Disconnect();
  launcher_.Exit(pids[0], W_EXITCODE(1, 0));  // not sent: nobody to send it to
  auto reg = Connect();
  ASSERT_EQ(reg.attempts_size(), 1);
  EXPECT_FALSE(reg.attempts(0).ranks(0).running());
  EXPECT_EQ(reg.attempts(0).ranks(0).exit().exit_code(), 1);
  EXPECT_TRUE(reg.attempts(0).ranks(1).running());
  // ... and is not repeated as a ProcessExited after the Register.
  launcher_.Exit(pids[1], W_EXITCODE(0, 0));
  auto m = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->process_exited().rank(), 3);
  EXPECT_EQ(outbox_.Count(v1::WorkerMessage::kProcessExited), 0);
}

TEST_F(SupervisorTest, ExitBetweenRegisterAndAckIsSentAfterTheAck) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  Disconnect();
  v1::Register reg = sup_->BuildRegister();  // the snapshot: both running
  EXPECT_TRUE(reg.attempts(0).ranks(0).running());
  launcher_.Exit(pids[0], W_EXITCODE(4, 0));  // after the snapshot, before the ack
  outbox_.SetUp(true);
  sup_->OnConnected(1000);
  auto m = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited));
  ASSERT_TRUE(m.has_value()) << "an exit the Register could not carry was lost";
  EXPECT_EQ(m->process_exited().exit().exit_code(), 4);
}

TEST_F(SupervisorTest, HeartbeatsFollowTheAckedInterval) {
  Start();
  Connect();
  launcher_.Exit(9999, 0);  // the ack has been handled: heartbeats are due from now on
  clock_.AdvanceMs(999);
  launcher_.Exit(9999, 0);
  EXPECT_EQ(outbox_.Count(v1::WorkerMessage::kHeartbeat), 0);
  clock_.AdvanceMs(1);
  launcher_.Poke();
  auto hb = outbox_.WaitFor(Is(v1::WorkerMessage::kHeartbeat));
  ASSERT_TRUE(hb.has_value());
  EXPECT_EQ(hb->heartbeat().time_unix_ms(), clock_.NowUnixMs());
  Disconnect();
  clock_.AdvanceMs(5000);
  launcher_.Exit(9999, 0);
  EXPECT_EQ(outbox_.Count(v1::WorkerMessage::kHeartbeat), 0);
}

TEST_F(SupervisorTest, HeartbeatsNameStoppedRanks) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  ASSERT_EQ(pids.size(), 2u);
  launcher_.SetStopped(pids[1]);
  clock_.AdvanceMs(1000);
  launcher_.Exit(9999, 0);  // wake the supervisor
  std::optional<v1::WorkerMessage> hb;
  for (int i = 0; i < 3 && !(hb && hb->heartbeat().stopped_size() > 0); ++i) {
    hb = outbox_.WaitFor(Is(v1::WorkerMessage::kHeartbeat));
    ASSERT_TRUE(hb.has_value());
    clock_.AdvanceMs(1000);
    launcher_.Exit(9999, 0);
  }
  ASSERT_EQ(hb->heartbeat().stopped_size(), 1);
  EXPECT_EQ(hb->heartbeat().stopped(0).job_id(), "j");
  EXPECT_EQ(hb->heartbeat().stopped(0).attempt(), 0);
  EXPECT_EQ(hb->heartbeat().stopped(0).rank(), 3);
}

TEST_F(SupervisorTest, OrphanedRanksAreStoppedAfterTheTimeout) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  Disconnect();
  clock_.AdvanceMs(config_.orphan_timeout_ms);
  launcher_.Exit(9999, 0);
  EXPECT_EQ(launcher_.CountSignals(pids[0], SIGTERM), 0);
  clock_.AdvanceMs(1);
  launcher_.Poke();
  for (int i = 0; i < 500 && launcher_.CountSignals(pids[1], SIGTERM) == 0; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(launcher_.CountSignals(pids[0], SIGTERM), 1);
  EXPECT_EQ(launcher_.CountSignals(pids[1], SIGTERM), 1);
}

TEST_F(SupervisorTest, ForgetAttemptDropsItsExitsButNotWhileItRuns) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  v1::CoordinatorMessage forget;
  forget.mutable_forget_attempt()->set_job_id("j");
  forget.mutable_forget_attempt()->set_attempt(0);
  sup_->Post(forget);
  launcher_.Exit(9999, 0);
  EXPECT_EQ(sup_->BuildRegister().attempts_size(), 1);  // still running: still reported
  launcher_.Exit(pids[0], 0);
  launcher_.Exit(pids[1], 0);
  EXPECT_EQ(sup_->BuildRegister().attempts_size(), 0);
  // The log files stay, and ReadLogs still finds them.
  EXPECT_TRUE(std::filesystem::exists(dir_ / "jobs/j/attempt-0/rank-3.log"));
  v1::CoordinatorMessage read;
  read.mutable_read_logs()->set_request_id(7);
  read.mutable_read_logs()->set_job_id("j");
  read.mutable_read_logs()->set_attempt(0);
  read.mutable_read_logs()->set_rank(3);
  sup_->Post(read);
  auto m = outbox_.WaitFor(Is(v1::WorkerMessage::kLogData));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->log_data().request_id(), 7);
  EXPECT_EQ(m->log_data().error(), "");
  EXPECT_TRUE(m->log_data().eof());
}

TEST_F(SupervisorTest, AFollowReadIsHeldUntilBytesTheEndOfItsWaitOrItsRankExit) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  auto read = [&](int64_t id) {
    v1::CoordinatorMessage m;
    m.mutable_read_logs()->set_request_id(id);
    m.mutable_read_logs()->set_job_id("j");
    m.mutable_read_logs()->set_attempt(0);
    m.mutable_read_logs()->set_rank(2);
    m.mutable_read_logs()->set_offset(0);
    m.mutable_read_logs()->set_wait_ms(5000);
    sup_->Post(m);
  };
  auto answer = [](int64_t id) {
    return [id](const v1::WorkerMessage& m) {
      return m.has_log_data() && m.log_data().request_id() == id;
    };
  };
  read(11);
  launcher_.Exit(9999, 0);  // (an unknown pid) lets the supervisor take the request first
  // The rank has written nothing: the request is held, not answered empty at once.
  clock_.AdvanceMs(4999);
  launcher_.Poke();  // a whole turn with the time 1 ms short of the wait
  EXPECT_EQ(outbox_.Count(answer(11)), 0u);
  clock_.AdvanceMs(1);  // the wait is over: answered, empty, not at the end
  launcher_.Poke();
  auto m = outbox_.WaitFor(answer(11));
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->log_data().data().empty());
  EXPECT_FALSE(m->log_data().eof());
  // Held again; the rank exits: answered at once with the end of its log.
  read(12);
  launcher_.Exit(pids[0], 0);
  m = outbox_.WaitFor(answer(12));
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->log_data().eof());
}

TEST_F(SupervisorTest, ExitRecordsExpireAfterAnHour) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  launcher_.Exit(pids[0], 0);
  launcher_.Exit(pids[1], 0);
  clock_.AdvanceMs(Supervisor::kKeepExitedMs);
  launcher_.Exit(9999, 0);
  EXPECT_EQ(sup_->BuildRegister().attempts_size(), 1);
  clock_.AdvanceMs(1);
  launcher_.Exit(9999, 0);
  EXPECT_EQ(sup_->BuildRegister().attempts_size(), 0);
}

TEST_F(SupervisorTest, ReadLogsOfUnknownRanksAndReservePort) {
  Start();
  Connect();
  for (const auto& [job, rank] :
       std::vector<std::pair<std::string, int>>{{"nope", 0}, {"../../etc", 0}, {"j", -1}}) {
    v1::CoordinatorMessage read;
    read.mutable_read_logs()->set_request_id(1);
    read.mutable_read_logs()->set_job_id(job);
    read.mutable_read_logs()->set_rank(rank);
    sup_->Post(read);
    auto m = outbox_.WaitFor(Is(v1::WorkerMessage::kLogData));
    ASSERT_TRUE(m.has_value());
    EXPECT_NE(m->log_data().error().find("no log for rank"), std::string::npos) << job;
  }
  v1::CoordinatorMessage reserve;
  reserve.mutable_reserve_port()->set_job_id("j");
  reserve.mutable_reserve_port()->set_attempt(1);
  sup_->Post(reserve);
  auto m = outbox_.WaitFor(Is(v1::WorkerMessage::kPortReserved));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->port_reserved().job_id(), "j");
  EXPECT_EQ(m->port_reserved().attempt(), 1);
  EXPECT_GT(m->port_reserved().port(), 0);
  EXPECT_EQ(m->port_reserved().error(), "");
}

// Binds `port` on every address, with SO_REUSEADDR as torch's TCPStore does when `reuse`,
// and listens. The errno of the failure, or 0 (the socket is closed either way).
int BindAndListen(int port, bool reuse) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (reuse) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int rc =
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd, 8) == 0 ? 0
                                                                                            : errno;
  close(fd);
  return rc;
}

// Issue 18: the master port is held by the worker from its reservation until the attempt's
// ranks end, so that two jobs starting together can never be given the same one.
TEST_F(SupervisorTest, MasterPortsOfJobsStartingTogetherNeverCollide) {
  Start();
  Connect();
  auto reserve = [&](const std::string& job) {
    v1::CoordinatorMessage m;
    m.mutable_reserve_port()->set_job_id(job);
    m.mutable_reserve_port()->set_attempt(0);
    sup_->Post(m);
    auto got = outbox_.WaitFor(Is(v1::WorkerMessage::kPortReserved));
    EXPECT_TRUE(got.has_value());
    EXPECT_EQ(got ? got->port_reserved().error() : "x", "");
    return got ? got->port_reserved().port() : 0;
  };
  for (int i = 0; i < 50; ++i) {
    const std::string a = "a" + std::to_string(i), b = "b" + std::to_string(i);
    const int pa = reserve(a), pb = reserve(b);
    ASSERT_GT(pa, 0);
    ASSERT_NE(pa, pb) << "iteration " << i;
    // Held: nobody else binds it, but rank 0's store (SO_REUSEADDR) can listen on it.
    EXPECT_EQ(BindAndListen(pa, false), EADDRINUSE) << "port " << pa << " was not held";
    EXPECT_EQ(BindAndListen(pa, true), 0) << strerror(BindAndListen(pa, true));
    EXPECT_EQ(reserve(a), pa) << "a repeated request gets the same port";
    // A Kill of an attempt that never launched here releases its port.
    sup_->Post(KillMsg(a, 0, 0));
    sup_->Post(KillMsg(b, 0, 0));
  }
  // An attempt that ran holds its port until its ranks end.
  const int port = reserve("j");
  LaunchTwo();
  EXPECT_EQ(BindAndListen(port, false), EADDRINUSE);
  launcher_.DieOnSignal();
  sup_->Post(KillMsg("j", 0, 0));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited)));
  int rc = EADDRINUSE;
  for (int i = 0; i < 500 && rc != 0; ++i) {
    std::this_thread::sleep_for(10ms);
    rc = BindAndListen(port, false);
  }
  EXPECT_EQ(rc, 0) << "the port of an ended attempt is still held";
}

TEST_F(SupervisorTest, StopKillsEveryRankAndReportsIt) {
  Start();
  Connect();
  auto pids = LaunchTwo();
  launcher_.DieOnSignal();
  sup_->Stop();
  EXPECT_EQ(launcher_.CountSignals(pids[0], SIGTERM), 1);
  EXPECT_EQ(launcher_.CountSignals(pids[1], SIGTERM), 1);
  auto first = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited));
  auto second = outbox_.WaitFor(Is(v1::WorkerMessage::kProcessExited));
  EXPECT_TRUE(first && second);
}

// Issue 12: a job's paths resolve under the job root, or its ranks never start.
// Holds each unpack of job code (WorkerConfig::before_unpack) until the test releases it.
struct UnpackGate {
  std::mutex mu;
  std::condition_variable cv;
  int entered = 0;
  int released = 0;
  void Hold() {
    std::unique_lock<std::mutex> lock(mu);
    const int me = ++entered;
    cv.notify_all();
    cv.wait(lock, [&] { return released >= me; });
  }
  bool WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 5s, [&] { return entered >= n; });
  }
  void Release(int n = 1) {
    std::lock_guard<std::mutex> lock(mu);
    released += n;
    cv.notify_all();
  }
};

// A job's code archive is unpacked off the supervisor's loop: while it is, the loop still
// launches other jobs (and sends heartbeats, pumps logs, kills); the job starts once its code
// is in its directory; a repeated Launch meanwhile is ignored, and a Kill meanwhile means it
// never starts.
TEST_F(SupervisorTest, CodeIsUnpackedOffTheLoopAndAKillMeanwhileMeansNoStart) {
  auto gate = std::make_shared<UnpackGate>();
  config_.before_unpack = [gate](const std::string&) { gate->Hold(); };
  const std::string src = dir_.string() + "-src";
  std::filesystem::create_directories(src);
  std::ofstream(src + "/train.py") << "print('hello')\n";
  auto packed = PackCodeDirectory(src);
  std::filesystem::remove_all(src);
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  const std::string sha = Sha256Hex(packed->archive);
  const std::string cached = CodeArchivePath(dir_.string(), sha);
  std::filesystem::create_directories(std::filesystem::path(cached).parent_path());
  std::ofstream(cached, std::ios::binary) << packed->archive;
  Start();
  Connect();
  auto coded = [&](const std::string& job) {
    v1::CoordinatorMessage m = LaunchMsg(job, 0, 0, 1, {"python3", "train.py"});
    m.mutable_launch()->mutable_spec()->set_code_sha256(sha);
    return m;
  };
  auto started = [](const std::string& job) {
    return [job](const v1::WorkerMessage& m) {
      return m.has_process_started() && m.process_started().job_id() == job;
    };
  };
  sup_->Post(coded("coded"));
  ASSERT_TRUE(gate->WaitEntered(1));
  sup_->Post(coded("coded"));  // repeated while its code is unpacked: ignored
  // The loop is free: another job starts while the archive is still being unpacked.
  sup_->Post(LaunchMsg("plain", 0, 0, 1, {"y"}));
  ASSERT_TRUE(outbox_.WaitFor(started("plain")).has_value()) << "the unpack held up the loop";
  EXPECT_EQ(outbox_.Count(started("coded")), 0u);
  gate->Release();
  ASSERT_TRUE(outbox_.WaitFor(started("coded")).has_value());
  auto reqs = launcher_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].argv, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_TRUE(std::filesystem::exists(reqs[1].working_dir + "/train.py"))
      << "the rank started before its code was in " << reqs[1].working_dir;

  sup_->Post(coded("killed"));
  ASSERT_TRUE(gate->WaitEntered(2));
  sup_->Post(KillMsg("killed", 0, 0));
  launcher_.Poke();  // the Kill is handled while the unpack is held
  sup_->Post(coded("after"));
  gate->Release(2);
  // Unpacks finish in order: once "after" started, the killed one's result was handled.
  ASSERT_TRUE(outbox_.WaitFor(started("after")).has_value());
  reqs = launcher_.requests();
  ASSERT_EQ(reqs.size(), 3u) << "a job killed while its code was unpacked started";
  EXPECT_EQ(std::filesystem::path(reqs[2].working_dir).filename(), "after");
  gate->Release(100);  // nothing else may wait at teardown
}

TEST_F(SupervisorTest, JobPathsOutsideTheJobRootFailTheLaunchNamingTheField) {
  config_.run_as = RunAsUser{4321, 4322, "someone", "/home/someone"};
  Start();
  Connect();
  const std::string root = dir_.string() + "/job-root";
  std::filesystem::create_directory_symlink("/etc", root + "/etc-link");
  struct Case {
    std::string field, value, expect;
  };
  const Case cases[] = {
      {"checkpoint_dir", "/etc",
       "checkpoint_dir: /etc is outside the job's own directory " + root + "/bad0"},
      {"checkpoint_dir", root + "/etc-link",
       "checkpoint_dir: " + root + "/etc-link resolves to /etc, outside the job's own directory " +
           root + "/bad1"},
      {"working_dir", "/tmp",
       "working_dir: /tmp is outside the job's own directory " + root + "/bad2"},
      {"working_dir", "../../x", "working_dir: '../../x' must not contain '..'"},
  };
  int n = 0;
  for (const Case& c : cases) {
    v1::CoordinatorMessage m = LaunchMsg("bad" + std::to_string(n++), 0, 0, 1, {"x"});
    v1::JobSpec* spec = m.mutable_launch()->mutable_spec();
    (c.field == "checkpoint_dir" ? spec->mutable_checkpoint_dir() : spec->mutable_working_dir())
        ->assign(c.value);
    sup_->Post(m);
    auto failed = outbox_.WaitFor(Is(v1::WorkerMessage::kLaunchFailed));
    ASSERT_TRUE(failed.has_value()) << c.expect;
    EXPECT_EQ(failed->launch_failed().error(), c.expect);
  }
  EXPECT_TRUE(launcher_.requests().empty());
  EXPECT_FALSE(std::filesystem::exists(root + "/bad0")) << "nothing made for a refused job";
  // Relative paths are relative to the job's directory; the rank runs as the user.
  v1::CoordinatorMessage m = LaunchMsg("good", 0, 0, 1, {"x"});
  m.mutable_launch()->mutable_spec()->set_checkpoint_dir("out/ckpt");
  sup_->Post(m);
  ASSERT_TRUE(outbox_.WaitFor(Is(v1::WorkerMessage::kProcessStarted)).has_value());
  auto reqs = launcher_.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].env.at("CONVOY_CHECKPOINT_DIR"), root + "/good/out/ckpt");
  EXPECT_EQ(reqs[0].working_dir, root + "/good");
  ASSERT_TRUE(reqs[0].user.has_value());
  EXPECT_EQ(reqs[0].user->uid, 4321u);
  EXPECT_EQ(reqs[0].user->gid, 4322u);
  struct stat st {};
  ASSERT_EQ(stat((root + "/good/out/ckpt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  if (geteuid() == 0) {  // only root can give files away
    EXPECT_EQ(st.st_uid, 4321u);
    ASSERT_EQ(stat((root + "/good").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 4321u);
    EXPECT_EQ(st.st_gid, 4322u);
    ASSERT_EQ(stat((dir_.string() + "/jobs/good/attempt-0/rank-0.log").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 4321u) << "the rank's log belongs to its user";
  }
}

}  // namespace worker_supervisor_test
}  // namespace convoy

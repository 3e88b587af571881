// The cgroup module (worker/exec/cgroups.h) on this host's real cgroup v1 controllers: a child that
// joins a group through its JoinFiles is held to the group's limits (the kernel's OOM killer
// for memory, EAGAIN for fork past pids.max) while a neighbour group's child is untouched;
// KillAll, Remove, and cleanup after a forgotten group. Needs root and the v1 memory, cpu and
// pids controllers (skipped otherwise, with the reason). Each test has its own base
// (convoy-test-PID-N) and leaves nothing under /sys/fs/cgroup and no process behind.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "worker/exec/cgroups.h"
#include "worker/exec/posix_process_launcher.h"

namespace convoy {
namespace worker_cgroups_v1_test {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kJoinFailed = 100;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// In a child: moves itself into `group` as a rank's child does (open, write "0", close).
bool Join(const std::vector<std::string>& files) {
  for (const auto& file : files) {
    const int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = write(fd, "0\n", 2) == 2;
    close(fd);
    if (!ok) return false;
  }
  return true;
}

// Forks a child that joins `group`, then runs `body` and _exits with what it returns.
pid_t Spawn(const Cgroup& group, const std::function<int()>& body) {
  const std::vector<std::string> files = group.JoinFiles();
  const pid_t pid = fork();
  if (pid == 0) {
    if (!Join(files)) _exit(kJoinFailed);
    _exit(body());
  }
  return pid;
}

// Waits for `pid`; its wait status.
int Wait(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Blocks until `fd` (a pipe's read end) is closed by every writer.
void WaitForClose(int fd) {
  char c;
  while (read(fd, &c, 1) != 0 && errno == EINTR) {
  }
}

class CgroupsRealV1Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to make cgroups";
    if (access("/sys/fs/cgroup/memory/cgroup.procs", W_OK) != 0) {
      GTEST_SKIP() << "/sys/fs/cgroup/memory is not a writable cgroup v1 memory controller";
    }
    static std::atomic<int> n{0};
    base_name_ = "convoy-test-" + std::to_string(getpid()) + "-" + std::to_string(n++);
    auto cgroups = Cgroups::OpenSystem(base_name_);
    if (!cgroups.ok()) GTEST_SKIP() << "no usable cgroup v1: " << cgroups.status().message();
    cgroups_ = std::move(*cgroups);
    if (cgroups_->version() != 1) GTEST_SKIP() << "this host has cgroup v2, not v1";
    base_dirs_ = cgroups_->BaseDirs();
    // Orphaned grandchildren come back to this process to be reaped.
    ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  }

  void TearDown() override {
    if (!cgroups_) return;
    for (const auto& name : cgroups_->Leftovers()) {
      Status removed = cgroups_->RemoveLeftover(name);
      EXPECT_TRUE(removed.ok()) << removed.message();
    }
    Status base = cgroups_->RemoveBase();
    EXPECT_TRUE(base.ok()) << base.message();
    for (const auto& dir : base_dirs_) EXPECT_FALSE(fs::exists(dir)) << dir;
    int status = 0;
    while (waitpid(-1, &status, 0) > 0) {  // every child and orphan, killed above
    }
    prctl(PR_SET_CHILD_SUBREAPER, 0);
  }

  std::string base_name_;
  std::unique_ptr<Cgroups> cgroups_;
  std::vector<std::string> base_dirs_;  // memory, cpu, pids
};

TEST_F(CgroupsRealV1Test, OomKillsTheGreedyChildAndSparesTheNeighbour) {
  auto greedy = cgroups_->Create("job-1/rank-0", CgroupLimits{64 * kMiB, 1.5, 0});
  ASSERT_TRUE(greedy.ok()) << greedy.status().message();
  auto neighbour = cgroups_->Create("job-2/rank-0", CgroupLimits{256 * kMiB, 1, 0});
  ASSERT_TRUE(neighbour.ok()) << neighbour.status().message();
  EXPECT_EQ(Read(base_dirs_[0] + "/job-1/rank-0/memory.limit_in_bytes"), "67108864\n");
  EXPECT_EQ(Read(base_dirs_[1] + "/job-1/rank-0/cpu.cfs_quota_us"), "150000\n");
  EXPECT_EQ((*greedy)->MemoryLimit(), 64 * kMiB);

  // The neighbour uses 32 MiB and holds it until the greedy child is gone.
  int hold[2];
  ASSERT_EQ(pipe2(hold, O_CLOEXEC), 0);
  const pid_t calm = Spawn(**neighbour, [&] {
    close(hold[1]);
    const size_t size = 32 * kMiB;
    auto* p = static_cast<volatile char*>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) return 1;
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    WaitForClose(hold[0]);
    return 0;
  });
  ASSERT_GT(calm, 0);
  close(hold[0]);

  const pid_t hog = Spawn(**greedy, [] {
    const size_t size = 256 * kMiB;
    auto* p = static_cast<volatile char*>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) return 1;
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    return 2;  // touched it all: the limit did not hold
  });
  ASSERT_GT(hog, 0);
  const int hog_status = Wait(hog);
  ASSERT_TRUE(WIFSIGNALED(hog_status)) << "exit code " << WEXITSTATUS(hog_status);
  EXPECT_EQ(WTERMSIG(hog_status), SIGKILL);
  EXPECT_EQ((*greedy)->OomKills(), 1);

  close(hold[1]);
  const int calm_status = Wait(calm);
  ASSERT_TRUE(WIFEXITED(calm_status));
  EXPECT_EQ(WEXITSTATUS(calm_status), 0);
  EXPECT_EQ((*neighbour)->OomKills(), 0);

  for (auto* group : {&*greedy, &*neighbour}) {
    Status removed = (*group)->Remove();
    EXPECT_TRUE(removed.ok()) << removed.message();
  }
  // The emptied parents (job-1, job-2) went with them.
  EXPECT_THAT(cgroups_->Leftovers(), IsEmpty());
}

TEST_F(CgroupsRealV1Test, ForkFailsPastPidsMax) {
  auto group = cgroups_->Create("rank-0", CgroupLimits{0, 0, 5});
  ASSERT_TRUE(group.ok()) << group.status().message();
  EXPECT_EQ(Read(base_dirs_[2] + "/rank-0/pids.max"), "5\n");
  // The child counts itself: at most 4 more fit (fewer where each process has more tasks,
  // as under TSAN, whose helper thread counts too), the rest fail with EAGAIN. Exit code:
  // forks made, or 50 + errno for another failure.
  const pid_t child = Spawn(**group, [] {
    int made = 0;
    for (int i = 0; i < 10; ++i) {
      const pid_t p = fork();
      if (p == 0) {
        pause();
        _exit(0);
      }
      if (p > 0) {
        ++made;
      } else if (errno != EAGAIN) {
        return 50 + errno;
      }
    }
    return made;
  });
  ASSERT_GT(child, 0);
  const int status = Wait(child);
  ASSERT_TRUE(WIFEXITED(status));
  const int made = WEXITSTATUS(status);
  EXPECT_GE(made, 1);
  EXPECT_LE(made, 4) << "more processes than pids.max 5 allows";
  EXPECT_EQ((*group)->Pids().size(), static_cast<size_t>(made));  // the paused grandchildren
  (*group)->KillAll();
  EXPECT_THAT((*group)->Pids(), IsEmpty());
  Status removed = (*group)->Remove();
  EXPECT_TRUE(removed.ok()) << removed.message();
}

TEST_F(CgroupsRealV1Test, KillAllKillsASleepingChild) {
  auto group = cgroups_->Create("rank-0", CgroupLimits{128 * kMiB, 0.5, 64});
  ASSERT_TRUE(group.ok()) << group.status().message();
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  const pid_t child = Spawn(**group, [&] {
    close(ready[0]);
    close(ready[1]);  // joined
    pause();
    return 0;
  });
  ASSERT_GT(child, 0);
  close(ready[1]);
  WaitForClose(ready[0]);
  close(ready[0]);
  EXPECT_THAT((*group)->Pids(), ElementsAre(child));
  // A busy group cannot be removed, and says why.
  Status busy = (*group)->Remove();
  ASSERT_FALSE(busy.ok());
  EXPECT_THAT(busy.message(), ::testing::HasSubstr("Device or resource busy"));

  (*group)->KillAll();
  EXPECT_THAT((*group)->Pids(), IsEmpty());
  const int status = Wait(child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ((*group)->OomKills(), 0);
  Status removed = (*group)->Remove();
  EXPECT_TRUE(removed.ok()) << removed.message();
  for (const auto& dir : base_dirs_) EXPECT_FALSE(fs::exists(dir + "/rank-0")) << dir;
}

TEST_F(CgroupsRealV1Test, AForgottenGroupIsALeftoverAtTheNextOpen) {
  pid_t child = -1;
  {
    auto group = cgroups_->Create("job-5/attempt-1/rank-0", CgroupLimits{128 * kMiB, 1, 64});
    ASSERT_TRUE(group.ok()) << group.status().message();
    int ready[2];
    ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
    child = Spawn(**group, [&] {
      close(ready[0]);
      close(ready[1]);
      pause();
      return 0;
    });
    ASSERT_GT(child, 0);
    close(ready[1]);
    WaitForClose(ready[0]);
    close(ready[0]);
  }
  // As a worker restarted after kill -9: a new Cgroups over the same base.
  cgroups_.reset();
  auto reopened = Cgroups::OpenSystem(base_name_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  cgroups_ = std::move(*reopened);
  EXPECT_THAT(cgroups_->Leftovers(), ElementsAre("job-5"));
  EXPECT_EQ(kill(child, 0), 0);  // still running

  Status removed = cgroups_->RemoveLeftover("job-5");
  ASSERT_TRUE(removed.ok()) << removed.message();
  const int status = Wait(child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_THAT(cgroups_->Leftovers(), IsEmpty());
  for (const auto& dir : base_dirs_) EXPECT_FALSE(fs::exists(dir + "/job-5")) << dir;
}

}  // namespace worker_cgroups_v1_test

// Outside the file's namespace: a friend of the launcher's (FRIEND_TEST), in namespace convoy.
using worker_cgroups_v1_test::CgroupsRealV1Test;

// The worker's launcher puts a rank into its group before it runs (RankChildSetup's join
// files, written as root right after the fork); a group it cannot join fails the launch,
// naming the stage, and nothing runs.
TEST_F(CgroupsRealV1Test, ALaunchedRankRunsInItsGroupFromItsStart) {
  using namespace worker_cgroups_v1_test;  // the file's helpers
  CgroupLimits limits;
  limits.memory_bytes = 64 << 20;
  auto group = cgroups_->Create("job-1/attempt-0/rank-0", limits);
  ASSERT_TRUE(group.ok()) << group.status().message();
  PosixProcessLauncher launcher;
  LaunchRequest req;
  req.argv = {"/bin/sleep", "30"};
  req.env = {{"PATH", "/usr/bin:/bin"}};
  req.cgroup_join_files = (*group)->JoinFiles();
  auto started = launcher.Launch(req);
  ASSERT_TRUE(started.ok()) << started.status().message();
  EXPECT_EQ((*group)->Pids(), std::vector<pid_t>{started->pid});
  const std::string self = Read("/proc/" + std::to_string(started->pid) + "/cgroup");
  EXPECT_NE(self.find("/" + base_name_ + "/job-1/attempt-0/rank-0\n"), std::string::npos) << self;

  LaunchRequest bad = req;
  bad.cgroup_join_files = {base_dirs_[0] + "/no-such-group/cgroup.procs"};
  auto refused = launcher.Launch(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr("joining the rank's cgroup: No such file or directory"));

  launcher.SignalGroup(started->pid, SIGKILL);
  for (int i = 0; i < 500 && launcher.PollExits().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  close(started->stdout_fd);
  close(started->stderr_fd);
  EXPECT_TRUE((*group)->Pids().empty());
  Status removed = (*group)->Remove();
  EXPECT_TRUE(removed.ok()) << removed.message();
}

}  // namespace convoy

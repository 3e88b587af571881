// The POSIX launcher with real processes: environment, exec failures, process groups,
// PR_SET_PDEATHSIG (a rank dies with the process that launched it), reaping. The supervisor
// with real processes is in worker_supervisor_processes_test.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "worker/exec/posix_process_launcher.h"

namespace convoy {
namespace worker_launcher_test {

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (int i = 0; i < 200; ++i) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return out;
}

bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  if (s.empty()) return false;
  return s.substr(s.rfind(')') + 2, 1) != "Z";
}

bool WaitGone(pid_t pid) {
  for (int i = 0; i < 500 && Alive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !Alive(pid);
}

TEST(PosixProcessLauncherTest, RunsTheArgvWithTheGivenEnvironmentAndNoShell) {
  PosixProcessLauncher launcher;
  LaunchRequest req;
  req.argv = {"sh", "-c", "echo \"$GREETING $0\"; echo err >&2; exit 3", "$(whoami)"};
  req.env = {{"PATH", "/usr/bin:/bin"}, {"GREETING", "hello"}};
  req.working_dir = "/";
  auto p = launcher.Launch(req);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(ReadAll(p->stdout_fd), "hello $(whoami)\n");  // the argument stayed literal
  EXPECT_EQ(ReadAll(p->stderr_fd), "err\n");
  EXPECT_EQ(getpgid(p->pid), p->pid);  // a process group of its own
  int status = 0;
  ASSERT_EQ(waitpid(p->pid, &status, 0), p->pid);
  EXPECT_EQ(WEXITSTATUS(status), 3);
  close(p->stdout_fd);
  close(p->stderr_fd);
}

TEST(PosixProcessLauncherTest, ExecFailuresAreReportedAndNothingIsLeft) {
  PosixProcessLauncher launcher;
  LaunchRequest req;
  req.env = {{"PATH", "/usr/bin:/bin"}};
  req.argv = {"no-such-program-convoy"};
  auto missing = launcher.Launch(req);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no-such-program-convoy"), std::string::npos);
  const std::string plain = "/tmp/convoy-not-executable-" + std::to_string(getpid());
  { std::ofstream(plain) << "#!/bin/sh\n"; }
  chmod(plain.c_str(), 0644);
  req.argv = {plain};  // exists, not executable (not even by root: no x bit at all)
  auto denied = launcher.Launch(req);
  unlink(plain.c_str());
  ASSERT_FALSE(denied.ok());
  EXPECT_NE(denied.status().message().find("Permission denied"), std::string::npos)
      << denied.status().message();
  req.argv = {"true"};
  req.working_dir = "/nonexistent-dir";
  auto bad_dir = launcher.Launch(req);
  ASSERT_FALSE(bad_dir.ok());
  EXPECT_NE(bad_dir.status().message().find("chdir /nonexistent-dir"), std::string::npos);
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);  // no child left behind (ECHILD)
}

TEST(PosixProcessLauncherTest, SignalGroupReachesGrandchildren) {
  PosixProcessLauncher launcher;
  LaunchRequest req;
  req.env = {{"PATH", "/usr/bin:/bin"}};
  req.argv = {"sh", "-c", "sleep 1000 & echo $!; wait"};
  auto p = launcher.Launch(req);
  ASSERT_TRUE(p.ok());
  std::string line;
  for (int i = 0; i < 500 && line.find('\n') == std::string::npos; ++i) {
    char buf[64];
    ssize_t n = read(p->stdout_fd, buf, sizeof(buf));  // the pipe is non-blocking
    if (n > 0) {
      line.append(buf, static_cast<size_t>(n));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const pid_t grandchild = std::stoi(line);
  EXPECT_EQ(getpgid(grandchild), p->pid);  // its own process group, inherited
  launcher.SignalGroup(p->pid, SIGKILL);
  waitpid(p->pid, nullptr, 0);
  EXPECT_TRUE(WaitGone(grandchild));
  close(p->stdout_fd);
  close(p->stderr_fd);
}

TEST(PosixProcessLauncherTest, RankDiesWithItsLauncher) {
  // A child process plays the worker: it launches `sleep` and reports its pid, then is
  // killed with SIGKILL. PR_SET_PDEATHSIG must take the rank with it.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t worker = fork();
  if (worker == 0) {
    PosixProcessLauncher launcher;
    LaunchRequest req;
    req.env = {{"PATH", "/usr/bin:/bin"}};
    req.argv = {"sleep", "1000"};
    auto p = launcher.Launch(req);
    pid_t pid = p.ok() ? p->pid : -1;
    if (write(fds[1], &pid, sizeof(pid)) != sizeof(pid)) _exit(1);
    pause();
    _exit(0);
  }
  pid_t rank = -1;
  ASSERT_EQ(read(fds[0], &rank, sizeof(rank)), static_cast<ssize_t>(sizeof(rank)));
  ASSERT_GT(rank, 0);
  EXPECT_TRUE(Alive(rank));
  kill(worker, SIGKILL);
  waitpid(worker, nullptr, 0);
  EXPECT_TRUE(WaitGone(rank)) << "rank " << rank << " outlived its worker";
  close(fds[0]);
  close(fds[1]);
}

TEST(PosixProcessLauncherTest, PollExitsReportsEachOfItsOwnChildrenOnce) {
  PosixProcessLauncher launcher;
  LaunchRequest req;
  req.env = {{"PATH", "/usr/bin:/bin"}};
  req.argv = {"sh", "-c", "exit 5"};
  auto a = launcher.Launch(req);
  req.argv = {"sh", "-c", "kill -TERM $$"};
  auto b = launcher.Launch(req);
  ASSERT_TRUE(a.ok() && b.ok());
  // A child that is not the launcher's own is left alone.
  const pid_t other = fork();
  if (other == 0) _exit(0);
  std::map<pid_t, int> seen;
  for (int i = 0; i < 500 && seen.size() < 2; ++i) {
    for (const ReapedProcess& p : launcher.PollExits()) {
      EXPECT_EQ(seen.count(p.pid), 0u);
      seen[p.pid] = p.wait_status;
    }
    if (seen.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(WIFEXITED(seen[a->pid]) && WEXITSTATUS(seen[a->pid]) == 5);
  EXPECT_TRUE(WIFSIGNALED(seen[b->pid]) && WTERMSIG(seen[b->pid]) == SIGTERM);
  EXPECT_TRUE(launcher.PollExits().empty());
  EXPECT_EQ(waitpid(other, nullptr, 0), other);  // still ours to reap
  for (int fd : {a->stdout_fd, a->stderr_fd, b->stdout_fd, b->stderr_fd}) close(fd);
}

TEST(PosixProcessLauncherTest, AnExitWakesItsDescriptorEvenWhileAChildHoldsThePipes) {
  PosixProcessLauncher launcher;
  LaunchRequest req;
  req.env = {{"PATH", "/usr/bin:/bin"}};
  // The rank leaves a child behind that keeps its stdout and stderr open: the pipes tell
  // nothing when the rank itself ends; its pidfd does.
  req.argv = {"sh", "-c", "sleep 30 & exec sleep 31"};
  auto p = launcher.Launch(req);
  ASSERT_TRUE(p.ok()) << p.status().message();
  std::vector<int> fds;
  ASSERT_EQ(launcher.ExitWakeFds(&fds), -1);  // no period: the descriptors say everything
  ASSERT_EQ(fds.size(), 1u);
  pollfd w{fds[0], POLLIN, 0};
  EXPECT_EQ(poll(&w, 1, 0), 0);  // it runs
  kill(p->pid, SIGKILL);
  EXPECT_EQ(poll(&w, 1, 10000), 1);
  auto exits = launcher.PollExits();
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].pid, p->pid);
  EXPECT_TRUE(WIFSIGNALED(exits[0].wait_status));
  fds.clear();
  launcher.ExitWakeFds(&fds);
  EXPECT_TRUE(fds.empty());
  kill(-p->pid, SIGKILL);  // the child left behind
  close(p->stdout_fd);
  close(p->stderr_fd);
}

TEST(PosixProcessLauncherTest, IsStoppedFollowsSigstopAndSigcont) {
  PosixProcessLauncher launcher;
  LaunchRequest req;
  req.env = {{"PATH", "/usr/bin:/bin"}};
  req.argv = {"sleep", "1000"};
  auto p = launcher.Launch(req);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto wait_for = [&](bool want) {
    for (int i = 0; i < 500 && launcher.IsStopped(p->pid) != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return launcher.IsStopped(p->pid) == want;
  };
  EXPECT_TRUE(wait_for(false));
  kill(p->pid, SIGSTOP);
  EXPECT_TRUE(wait_for(true));
  kill(p->pid, SIGCONT);
  EXPECT_TRUE(wait_for(false));
  launcher.SignalGroup(p->pid, SIGKILL);
  for (int i = 0; i < 500 && launcher.PollExits().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(launcher.IsStopped(p->pid));  // gone
  close(p->stdout_fd);
  close(p->stderr_fd);
}

TEST(PosixProcessLauncherTest, ChildKeepsNoDescriptorOfTheWorker) {
  const int devnull = open("/dev/null", O_RDONLY);
  const int leaked = fcntl(devnull, F_DUPFD, 50);  // not close-on-exec, on purpose
  close(devnull);
  ASSERT_GE(leaked, 50);
  PosixProcessLauncher launcher;
  LaunchRequest req;
  req.env = {{"PATH", "/usr/bin:/bin"}};
  req.argv = {"sh", "-c", "ls /proc/self/fd"};
  auto p = launcher.Launch(req);
  close(leaked);
  ASSERT_TRUE(p.ok());
  const std::string out = ReadAll(p->stdout_fd);
  std::set<std::string> fds;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) fds.insert(l);
  // 0, 1, 2 and the one ls opens to read the directory: nothing of the worker's.
  EXPECT_EQ(fds, (std::set<std::string>{"0", "1", "2", "3"})) << out;
  waitpid(p->pid, nullptr, 0);
  close(p->stdout_fd);
  close(p->stderr_fd);
}

// ---- Issue 12: ranks run as an unprivileged user.

// The user a root worker runs ranks as: `convoy` (scripts/install-deps.sh creates it), else
// `nobody` so that the drop is still tested on a machine without it.
std::optional<RunAsUser> UnprivilegedUser() {
  for (const char* name : {"convoy", "nobody"}) {
    auto u = LookupUser(name);
    if (u.ok() && u->uid != 0) return *u;
  }
  return std::nullopt;
}

TEST(PosixProcessLauncherTest, RootDropsToTheRunAsUserWithNoSupplementaryGroups) {
  if (geteuid() != 0) GTEST_SKIP() << "only a root worker switches users; this test is not root";
  const auto user = UnprivilegedUser();
  ASSERT_TRUE(user.has_value()) << "no convoy or nobody user";
  PosixProcessLauncher launcher;
  LaunchRequest req;
  req.argv = {"sh", "-c",
              "id -u; id -g; id -G; echo \"$HOME $USER $LOGNAME\"; "
              "grep -E '^(Uid|Gid|Groups):' /proc/self/status"};
  req.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/root"}, {"USER", "root"}};
  req.working_dir = "/";
  req.user = user;
  auto p = launcher.Launch(req);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const std::string out = ReadAll(p->stdout_fd);
  const std::string uid = std::to_string(user->uid), gid = std::to_string(user->gid);
  std::istringstream lines(out);
  std::string l;
  std::getline(lines, l);
  EXPECT_EQ(l, uid) << out;
  std::getline(lines, l);
  EXPECT_EQ(l, gid) << out;
  std::getline(lines, l);
  EXPECT_EQ(l, gid) << "supplementary groups kept: " << out;
  std::getline(lines, l);
  EXPECT_EQ(l, user->home + " " + user->name + " " + user->name) << out;
  // Real, effective, saved and file-system ids all changed; the group list is just the gid.
  EXPECT_NE(out.find("Uid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid + "\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Gid:\t" + gid + "\t" + gid + "\t" + gid + "\t" + gid + "\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Groups:\t" + gid + " \n"), std::string::npos) << out;
  int status = 0;
  ASSERT_EQ(waitpid(p->pid, &status, 0), p->pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadAll(p->stderr_fd);
  close(p->stdout_fd);
  close(p->stderr_fd);
}

TEST(PosixProcessLauncherTest, DroppedRankStillDiesWithItsLauncher) {
  // Changing credentials clears PR_SET_PDEATHSIG: the launcher must set it after the drop.
  if (geteuid() != 0) GTEST_SKIP() << "only a root worker switches users; this test is not root";
  const auto user = UnprivilegedUser();
  ASSERT_TRUE(user.has_value()) << "no convoy or nobody user";
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t worker = fork();
  if (worker == 0) {
    PosixProcessLauncher launcher;
    LaunchRequest req;
    req.env = {{"PATH", "/usr/bin:/bin"}};
    req.argv = {"sleep", "1000"};
    req.working_dir = "/";
    req.user = user;
    auto p = launcher.Launch(req);
    pid_t pid = p.ok() ? p->pid : -1;
    if (write(fds[1], &pid, sizeof(pid)) != sizeof(pid)) _exit(1);
    pause();
    _exit(0);
  }
  pid_t rank = -1;
  ASSERT_EQ(read(fds[0], &rank, sizeof(rank)), static_cast<ssize_t>(sizeof(rank)));
  ASSERT_GT(rank, 0);
  EXPECT_TRUE(Alive(rank));
  kill(worker, SIGKILL);
  waitpid(worker, nullptr, 0);
  EXPECT_TRUE(WaitGone(rank)) << "rank " << rank << " outlived its worker";
  if (Alive(rank)) kill(rank, SIGKILL);
  close(fds[0]);
  close(fds[1]);
}

TEST(PosixProcessLauncherTest, AFailedDropIsReportedAndNothingRuns) {
  // A process that is not root cannot switch users: the launch fails, saying so. A child
  // plays that worker (it gives up root first when the test has it).
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t worker = fork();
  if (worker == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
    PosixProcessLauncher launcher;
    LaunchRequest req;
    req.env = {{"PATH", "/usr/bin:/bin"}};
    req.argv = {"true"};
    req.user = RunAsUser{4321, 4322, "someone", "/"};
    auto p = launcher.Launch(req);
    const std::string msg = p.ok() ? "started" : p.status().message();
    if (write(fds[1], msg.data(), msg.size()) < 0) _exit(4);
    _exit(0);
  }
  close(fds[1]);
  const std::string msg = ReadAll(fds[0]);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(worker, &status, 0), worker);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << WEXITSTATUS(status);
  EXPECT_EQ(msg, "dropping privileges to uid 4321 (gid 4322) failed: Operation not permitted");
}

TEST(ResolveRankUserTest, RootWorkersNeedAnUnprivilegedUser) {
  // Not root: ranks run as the worker's own user, whatever --run-as says.
  auto own = ResolveRankUser("no-such-user-convoy", false, 1000);
  ASSERT_TRUE(own.ok());
  EXPECT_FALSE(own->has_value());
  // Root: the user must exist ...
  auto missing = ResolveRankUser("no-such-user-convoy", false, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("useradd --system --no-create-home --shell "
                                            "/usr/sbin/nologin no-such-user-convoy"),
            std::string::npos)
      << missing.status().message();
  // ... and not be root, unless asked for.
  auto root = ResolveRankUser("root", false, 0);
  ASSERT_FALSE(root.ok());
  EXPECT_NE(root.status().message().find("--allow-root-jobs"), std::string::npos);
  auto allowed = ResolveRankUser("0", true, 0);
  ASSERT_TRUE(allowed.ok()) << allowed.status().message();
  ASSERT_TRUE(allowed->has_value());
  EXPECT_EQ((*allowed)->uid, 0u);
  EXPECT_EQ((*allowed)->name, "root");
  const auto user = UnprivilegedUser();
  if (user) {
    auto named = ResolveRankUser(user->name, false, 0);
    ASSERT_TRUE(named.ok()) << named.status().message();
    EXPECT_EQ((*named)->uid, user->uid);
    EXPECT_EQ((*named)->gid, user->gid);
  }
}

}  // namespace worker_launcher_test
}  // namespace convoy

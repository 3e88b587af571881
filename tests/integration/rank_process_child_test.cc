// The rank child's set-up (rank_process/rank_child.h), shared by the worker's launcher and the warm
// trainer, in real forked children: what the child looks like afterwards, from the inside,
// and how a failure reaches the parent.
#include "rank_process/rank_child.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace convoy {
namespace rank_process_child_test {

// Forks; the child sets itself up with `setup` (descriptors filled in here) and then runs
// `check`, whose return value is its exit code. Returns the child's wait status; `stage` and
// `error` get the child's report (0 when it made none), `out` what it wrote.
template <typename Check>
int RunChild(RankChildSetup setup, Check check, std::string* out, int* stage = nullptr,
             int* error = nullptr) {
  int pipe_out[2], report[2];
  EXPECT_EQ(pipe2(pipe_out, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(report, O_CLOEXEC), 0);
  setup.stdout_fd = pipe_out[1];
  setup.stderr_fd = pipe_out[1];
  setup.report_fd = report[1];
  setup.parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    SetUpRankChild(setup);
    close(3);  // as the warm trainer does once the rank runs
    _exit(check());
  }
  close(pipe_out[1]);
  close(report[1]);
  int s = 0, e = 0;
  const bool failed = ReadRankChildFailure(report[0], &s, &e);
  close(report[0]);
  if (stage != nullptr) *stage = failed ? s : 0;
  if (error != nullptr) *error = failed ? e : 0;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_out[0], buf, sizeof(buf))) > 0) out->append(buf, static_cast<size_t>(n));
  close(pipe_out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

int ProcStatusField(const char* name) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  int value = -1;
  while (f != nullptr && fgets(line, sizeof(line), f) != nullptr) {
    if (strncmp(line, name, strlen(name)) == 0)
      value = static_cast<int>(strtol(line + strlen(name), nullptr, 16));
  }
  if (f != nullptr) fclose(f);
  return value;
}

TEST(RankChildTest, AChildIsSetUpAsAColdRankIs) {
  // The parent ignores one signal, handles none, blocks another, and holds a descriptor
  // that must not reach the rank.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_usr1 {};
  sigaction(SIGUSR1, &ignore, &old_usr1);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  sigprocmask(SIG_BLOCK, &block, &old_mask);
  const int opened = open("/dev/null", O_RDONLY);
  const int secret = fcntl(opened, F_DUPFD, 10);  // above 3, not close-on-exec
  close(opened);
  ASSERT_GT(secret, 3);

  RankChildSetup setup;
  setup.working_dir = "/";
  std::string out;
  const int status = RunChild(
      setup,
      [secret] {
        if (getpgrp() != getpid()) return 10;
        struct stat in {
        }, null{};
        if (fstat(0, &in) != 0 || stat("/dev/null", &null) != 0 || in.st_rdev != null.st_rdev) {
          return 11;
        }
        if (fcntl(secret, F_GETFD) != -1 || errno != EBADF) return 12;
        struct sigaction now {};
        sigaction(SIGUSR1, nullptr, &now);
        if (now.sa_handler != SIG_DFL) return 13;
        sigaction(SIGPIPE, nullptr, &now);
        if (now.sa_handler != SIG_DFL) return 14;
        sigset_t mask;
        sigprocmask(SIG_SETMASK, nullptr, &mask);
        if (sigismember(&mask, SIGUSR2)) return 15;
        int pdeathsig = 0;
        if (prctl(PR_GET_PDEATHSIG, &pdeathsig) != 0 || pdeathsig != SIGKILL) return 16;
        char cwd[64];
        if (getcwd(cwd, sizeof(cwd)) == nullptr || std::string(cwd) != "/") return 17;
        if (ProcStatusField("SigIgn:") != 0) return 18;
        const char ok[] = "set up\n";
        return write(1, ok, sizeof(ok) - 1) == sizeof(ok) - 1 ? 0 : 19;
      },
      &out);
  sigaction(SIGUSR1, &old_usr1, nullptr);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  close(secret);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(out, "set up\n");
}

TEST(RankChildTest, RootDropsToTheUserVerifiedAndDumpableAsAfterExec) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to drop to another user";
  RankChildSetup setup;
  setup.drop = true;
  setup.uid = 65534;
  setup.gid = 65534;
  std::string out;
  const int status = RunChild(
      setup,
      [] {
        if (getuid() != 65534 || geteuid() != 65534 || getgid() != 65534 || getegid() != 65534) {
          return 10;
        }
        gid_t groups[4];
        const int n = getgroups(4, groups);
        if (n > 1 || (n == 1 && groups[0] != 65534)) return 11;
        if (setuid(0) == 0) return 12;
        if (prctl(PR_GET_DUMPABLE) != 1) return 13;
        int pdeathsig = 0;
        if (prctl(PR_GET_PDEATHSIG, &pdeathsig) != 0 || pdeathsig != SIGKILL) return 14;
        return 0;
      },
      &out);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(RankChildTest, AFailureIsReportedWithItsStageAndNothingRuns) {
  RankChildSetup setup;
  setup.working_dir = "/nonexistent-convoy-dir";
  std::string out;
  int stage = 0, error = 0;
  const int status = RunChild(
      setup, [] { return 0; }, &out, &stage, &error);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 127);
  EXPECT_EQ(stage, kRankChildChdir);
  EXPECT_EQ(error, ENOENT);
  EXPECT_EQ(RankChildFailureWhat(stage, "", setup.working_dir, 0, 0),
            "chdir /nonexistent-convoy-dir");
  EXPECT_EQ(RankChildFailureWhat(kRankChildDrop, "", "", 998, 997),
            "dropping privileges to uid 998 (gid 997) failed");
  EXPECT_EQ(RankChildFailureWhat(kRankChildExec, "/opt/x", "", 0, 0), "exec /opt/x");
}

}  // namespace rank_process_child_test
}  // namespace convoy

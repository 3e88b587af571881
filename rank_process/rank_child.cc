#include "rank_process/rank_child.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace convoy {

void FailRankChild(int report_fd, int stage) {
  const int report[2] = {stage, errno};
  ssize_t ignored = write(report_fd, report, sizeof(report));
  (void)ignored;
  _exit(127);
}

void SetUpRankChild(const RankChildSetup& s) {
  // Into its cgroup first, while still root: a limit holds from the rank's first allocation.
  for (const char* const* file = s.cgroup_join_files; file != nullptr && *file != nullptr; ++file) {
    const int fd = open(*file, O_WRONLY | O_CLOEXEC);
    if (fd < 0) FailRankChild(s.report_fd, kRankChildCgroup);
    const bool joined = write(fd, "0\n", 2) == 2;
    close(fd);
    if (!joined) FailRankChild(s.report_fd, kRankChildCgroup);
  }
  setpgid(0, 0);
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(s.stdout_fd, 1) < 0 || dup2(s.stderr_fd, 2) < 0) {
    FailRankChild(s.report_fd, kRankChildStdio);
  }
  // Failures are reported on 3 from here on; it closes by itself when an exec succeeds.
  if (s.report_fd != 3 && dup2(s.report_fd, 3) < 0) FailRankChild(s.report_fd, kRankChildStdio);
  fcntl(3, F_SETFD, FD_CLOEXEC);
  if (s.drop) {
    // Groups first (they need root), then the gid, then the uid, which ends root.
    if (setgroups(1, &s.gid) != 0 || setgid(s.gid) != 0 || setuid(s.uid) != 0) {
      FailRankChild(3, kRankChildDrop);
    }
    gid_t groups[2] = {0, 0};
    const int ngroups = getgroups(2, groups);
    if (getuid() != s.uid || geteuid() != s.uid || getgid() != s.gid || getegid() != s.gid ||
        ngroups > 1 || (ngroups == 1 && groups[0] != s.gid)) {
      errno = EPERM;
      FailRankChild(3, kRankChildDrop);
    }
    if (s.uid != 0 && setuid(0) == 0) {
      errno = EPERM;
      FailRankChild(3, kRankChildRegain);
    }
    // Changing credentials made the process non-dumpable; an execve of the rank's program
    // would make it dumpable again, so a rank that is not exec'd (the warm trainer's) is made
    // so here: core dumps, the user's own debuggers and /proc/PID owned by the user.
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  }
  // After the drop: changing credentials clears the parent-death signal.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) FailRankChild(3, kRankChildPrctl);
  if (getppid() != s.parent) _exit(137);  // the parent died before prctl took effect
  if (s.working_dir != nullptr && s.working_dir[0] != '\0' && chdir(s.working_dir) != 0) {
    FailRankChild(3, kRankChildChdir);
  }
  // Every other descriptor goes (the worker's sockets, other ranks' pipes, the zygote's).
  if (syscall(SYS_close_range, 4, ~0U, 0) != 0) {
    for (int fd = 4; fd < s.max_fd; ++fd) close(fd);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Every disposition back to the default: what an exec does to handled signals, and also to
  // ignored ones (the worker ignores SIGPIPE). SIGKILL and SIGSTOP cannot be changed; the C
  // library refuses its own internal signals (EINVAL), which is fine.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
}

bool ReadRankChildFailure(int report_fd, int* stage, int* error) {
  int report[2] = {0, 0};
  ssize_t n;
  do {
    n = read(report_fd, report, sizeof(report));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  *stage = report[0];
  *error = n == static_cast<ssize_t>(sizeof(report)) ? report[1] : EIO;
  return true;
}

std::string RankChildFailureWhat(int stage, const std::string& program,
                                 const std::string& working_dir, uid_t uid, gid_t gid) {
  switch (stage) {
    case kRankChildPrctl:
      return "prctl";
    case kRankChildStdio:
      return "redirecting stdio";
    case kRankChildChdir:
      return "chdir " + working_dir;
    case kRankChildDrop:
    case kRankChildRegain:
      return "dropping privileges to uid " + std::to_string(uid) + " (gid " + std::to_string(gid) +
             ") failed";
    case kRankChildProcView:
      return "showing the rank's arguments and environment in /proc";
    case kRankChildCgroup:
      return "joining the rank's cgroup";
    case kRankChildExec:
    default:
      return "exec " + program;
  }
}

}  // namespace convoy

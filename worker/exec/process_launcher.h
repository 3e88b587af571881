// Starting, signalling and reaping rank processes (after Mesos' Launcher). The POSIX
// launcher (posix_process_launcher.h) forks and execs an argv (never a shell) in a new
// process group with PR_SET_PDEATHSIG, stdout and stderr into pipes; unit tests substitute a
// fake (tests/unit/worker_supervisor_test.cc).
//
// There is no Recover: every rank carries PR_SET_PDEATHSIG=SIGKILL, so a worker that
// restarts (for any reason, kill -9 included) has no processes left to adopt. What survives
// a restart is on disk: the ranks' log files, which ReadLogs still serves.
//
// Threading: PR_SET_PDEATHSIG fires when the *thread* that forked exits, so Launch must be
// called from one long-lived thread (the worker's supervisor thread), and so must PollExits
// and ExitWakeFds.
// SignalGroup may be called from any thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/host/users.h"

namespace convoy {

struct LaunchRequest {
  std::vector<std::string> argv;
  // The whole environment of the child (PATH in it is used to find argv[0]).
  std::map<std::string, std::string> env;
  // Empty: the worker's own working directory.
  std::string working_dir;
  // Set: the child drops supplementary groups, then sets gid, then uid, before exec (the
  // worker must be root), and HOME, USER and LOGNAME are the user's. Unset: the child runs
  // as the worker does, with the environment as given.
  std::optional<RunAsUser> user;
  // The rank's cgroup (Cgroup::JoinFiles): the child joins it right after the fork, as root,
  // before anything else (rank_process/rank_child.h). Empty: it stays in the worker's. The files
  // are the user's too, so that a child of a server that runs as the user joins as well.
  std::vector<std::string> cgroup_join_files;
  // Only root may move the rank there (cgroup v2 asks for write access to the common
  // ancestor of both groups): never forked by a server that runs as the user.
  bool cgroup_join_needs_root = false;
};

struct LaunchedProcess {
  pid_t pid = 0;  // also its process group id
  // Non-blocking read ends of the child's stdout and stderr, owned by the caller; -1 when
  // the launcher captures no output (a fake).
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// One process that ended: its pid and the status waitpid gave for it.
struct ReapedProcess {
  pid_t pid = 0;
  int wait_status = 0;
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Starts the process. Fails with the reason (e.g. "exec /opt/x: No such file or
  // directory", "chdir /nope: ...", "dropping privileges to uid 998 failed: ...") when it
  // could not be started; nothing is left running.
  virtual StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) = 0;
  // Sends `signal` to the process group `pgid`. A group that is gone is not an error.
  virtual void SignalGroup(pid_t pgid, int signal) = 0;
  // Never blocks: the processes this launcher started that ended since the last call, each
  // reported once (and reaped, so their pids are free again).
  virtual std::vector<ReapedProcess> PollExits() = 0;
  // What the caller waits on to learn of exits without a timer: appends descriptors that
  // become readable when PollExits has something new (a rank ended, a warm trainer spoke) and
  // returns the longest the caller may wait without calling PollExits: -1 when the
  // descriptors cover every exit, else a period in milliseconds. The descriptors stay the
  // launcher's; they are valid until the next Launch or PollExits. The default (a launcher
  // with no descriptors) is polled every 50 ms.
  virtual int ExitWakeFds(std::vector<int>* fds) {
    (void)fds;
    return 50;
  }
  // Whether the process is stopped (state T or t: SIGSTOP, a tracer). Never blocks.
  virtual bool IsStopped(pid_t pid) {
    (void)pid;
    return false;
  }
};

}  // namespace convoy

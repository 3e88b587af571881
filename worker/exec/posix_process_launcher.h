// The real launcher: fork/exec with execvpe-like PATH lookup, a process group per rank,
// the rank's user (LaunchRequest::user: supplementary groups dropped, then gid, then uid,
// then checked), PR_SET_PDEATHSIG=SIGKILL, every other descriptor closed, stdout/stderr
// into pipes, failures before exec reported through a close-on-exec pipe.
//
// Threading: see process_launcher.h (Launch and PollExits from one long-lived thread).
// `pids_` is touched only by that thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>

#include "worker/exec/process_launcher.h"

namespace convoy {

class PosixProcessLauncher : public ProcessLauncher {
 public:
  // Closes its pidfds; the processes are left as they are.
  ~PosixProcessLauncher() override;

  StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override;
  void SignalGroup(pid_t pgid, int signal) override;
  // waitpid(pid, WNOHANG) on each process it started: other children of the calling
  // process (a test's, gRPC's) are left alone.
  std::vector<ReapedProcess> PollExits() override;
  // A pidfd per process it started (readable once the process has ended; Linux 5.3): -1, no
  // period. Where pidfd_open fails (an older kernel), 50 ms.
  int ExitWakeFds(std::vector<int>* fds) override;
  // From /proc/<pid>/stat.
  bool IsStopped(pid_t pid) override;

 private:
  // Started and not yet reaped, with a pidfd of each (-1 when pidfd_open failed).
  std::map<pid_t, int> pids_;
};

// The path execve would run for `program` under `path_env` (the child's PATH; empty: the
// default /usr/local/bin:/usr/bin:/bin), or empty when none is executable. A program with a
// '/' is returned as it is.
std::string ResolveProgram(const std::string& program, const std::string& path_env);

}  // namespace convoy

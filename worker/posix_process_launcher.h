// The real launcher: fork/exec with execvpe-like PATH lookup, a process group per rank,
// PR_SET_PDEATHSIG=SIGKILL, every other descriptor closed, stdout/stderr into pipes, exec
// errors reported through a close-on-exec pipe.
//
// Threading: see process_launcher.h (Launch and PollExits from one long-lived thread).
// `pids_` is touched only by that thread.
#pragma once

#include <set>
#include <string>

#include "worker/process_launcher.h"

namespace convoy {

class PosixProcessLauncher : public ProcessLauncher {
 public:
  StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override;
  void SignalGroup(pid_t pgid, int signal) override;
  // waitpid(pid, WNOHANG) on each process it started: other children of the calling
  // process (a test's, gRPC's) are left alone.
  std::vector<ReapedProcess> PollExits() override;
  // From /proc/<pid>/stat.
  bool IsStopped(pid_t pid) override;

 private:
  std::set<pid_t> pids_;  // started and not yet reaped
};

// The path execve would run for `program` under `path_env` (the child's PATH; empty: the
// default /usr/local/bin:/usr/bin:/bin), or empty when none is executable. A program with a
// '/' is returned as it is.
std::string ResolveProgram(const std::string& program, const std::string& path_env);

}  // namespace convoy

// Starting and signalling rank processes (after Mesos' Launcher). The POSIX launcher forks
// and execs an argv (never a shell) in a new process group with PR_SET_PDEATHSIG, stdout and
// stderr into pipes. Tests may substitute a fake.
//
// Threading: PR_SET_PDEATHSIG fires when the *thread* that forked exits, so Launch must be
// called from one long-lived thread (the worker's supervisor thread).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace convoy {

struct LaunchRequest {
  std::vector<std::string> argv;
  // The whole environment of the child.
  std::map<std::string, std::string> env;
  std::string working_dir;
};

struct LaunchedProcess {
  pid_t pid = 0;  // also its process group id
  int stdout_fd = -1;
  int stderr_fd = -1;
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Starts the process. Fails (with the exec error, e.g. "python4: No such file or
  // directory") when it could not be started; nothing is left running then.
  virtual StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) = 0;
  // Sends `signal` to the process group `pgid`. ESRCH (already gone) is not an error.
  virtual void SignalGroup(pid_t pgid, int signal) = 0;
};

class PosixProcessLauncher : public ProcessLauncher {
 public:
  StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override;
  void SignalGroup(pid_t pgid, int signal) override;
};

// The path execve would run for argv[0] under `path_env` (PATH), or empty when none.
std::string ResolveProgram(const std::string& program, const std::string& path_env);

}  // namespace convoy

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

#include "worker/process_launcher.h"

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

// The account `name` (or a numeric uid) from the password database. NotFound when there
// is none.
StatusOr<RunAsUser> LookupUser(const std::string& name);

// --run-as owner: the Unix account of a job's owner (a Convoy user name). Refused, saying
// why: no owner (an --insecure coordinator), a name that is all digits (never taken for a
// uid), no such account on this worker, or an account with uid or gid 0.
StatusOr<RunAsUser> OwnerAccount(const std::string& owner, const std::string& worker);

// Gives `path`, a file the worker made for a rank (its log, its metrics socket), to `user`
// without following a symlink; with `parent_searchable`, also lets everyone search its
// parent directory when the worker owns it (a socket is reached through it). Nothing
// without a user; a failure is logged.
void GiveToUser(const std::optional<RunAsUser>& user, const std::string& path,
                bool parent_searchable);

// The user ranks run as, from --run-as and --allow-root-jobs, for a worker whose effective
// uid is `euid`. A root worker: that user; an unknown user is an error saying how to create
// it, and uid 0 is one unless `allow_root`. Any other worker cannot switch users: nullopt
// (ranks run as the worker's own user).
StatusOr<std::optional<RunAsUser>> ResolveRankUser(const std::string& run_as, bool allow_root,
                                                   uid_t euid);

}  // namespace convoy

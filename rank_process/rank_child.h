// How a rank's process is set up between fork and its program: one copy, used by the
// worker's launcher (worker/exec/posix_process_launcher.cc, which then execs the rank's program)
// and by the warm trainer (rank_process/zygote_protocol.cc, which then runs the trainer's main in
// the forked process), so that a rank forked warm is set up exactly as a cold one and the two
// cannot drift apart. The Python forkserver (worker/exec/convoy-forkserver.py) does the same steps
// in Python, in the same order.
//
// POSIX and the standard library only (the trainer links it without gRPC). SetUpRankChild
// and FailRankChild run in a child forked from a multi-threaded process: they allocate
// nothing and call only async-signal-safe functions.
#pragma once

#include <sys/types.h>

#include <string>

namespace convoy {

// What failed, as reported through the report descriptor ({stage, errno}, two ints).
enum RankChildStage : int {
  kRankChildPrctl = 1,     // PR_SET_PDEATHSIG
  kRankChildStdio = 2,     // stdin from /dev/null, stdout and stderr
  kRankChildChdir = 3,     // the working directory
  kRankChildExec = 4,      // execve (the launcher's, after SetUpRankChild)
  kRankChildDrop = 5,      // setgroups, setgid or setuid failed, or did not take
  kRankChildRegain = 6,    // root could be regained after dropping it
  kRankChildProcView = 7,  // the warm trainer could not show the rank's argv/env in /proc
  kRankChildCgroup = 8,    // joining the rank's cgroup (writing "0" into a cgroup.procs)
};

struct RankChildSetup {
  int stdout_fd = -1;  // becomes descriptor 1
  int stderr_fd = -1;  // becomes descriptor 2
  // Becomes descriptor 3, close-on-exec: where a failure is reported. After an exec it is
  // closed by the kernel; a caller that runs the rank in this process closes 3 itself once
  // the rank runs (the parent then reads the end of the pipe: started).
  int report_fd = -1;
  // Drop to uid/gid (the parent is root): supplementary groups, then gid, then uid.
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
  // The process that forked: the child exits 137 when it is gone before PR_SET_PDEATHSIG
  // took effect.
  pid_t parent = 0;
  // Null or empty: the working directory stays.
  const char* working_dir = nullptr;
  // Null, or a null-terminated array of files the child writes "0\n" into, as root and before
  // anything else it does, to join the rank's cgroup (Cgroup::JoinFiles): every process the
  // rank starts is then in it too.
  const char* const* cgroup_join_files = nullptr;
  // Highest descriptor closed one by one when close_range(2) is missing (kernel < 5.9).
  int max_fd = 65536;
};

// In the child, right after fork, in this order: the rank's cgroup joined (each of
// `cgroup_join_files`); a process group of its own; stdin from
// /dev/null, stdout and stderr from the setup; the report descriptor moved to 3; with
// `drop`, supplementary groups dropped (only the gid is kept), then the gid, then the uid,
// verified (real and effective ids, and that root cannot be regained); dumpable again, as
// an execve would make it (core dumps, the user's own debuggers, /proc owned by the user);
// PR_SET_PDEATHSIG(SIGKILL) (after the drop, which clears it), exiting 137 when the parent
// is gone already; the working directory; every descriptor above 3 closed; the signal mask
// emptied and every signal's disposition back to the default. Returns when all of it
// worked; otherwise writes {stage, errno} to the report descriptor and _exits 127.
void SetUpRankChild(const RankChildSetup& setup);

// Writes {stage, errno} to `report_fd` and _exits 127. Async-signal-safe.
[[noreturn]] void FailRankChild(int report_fd, int stage);

// The parent's side: reads the child's report from `report_fd` (the read end; EINTR is
// retried). True with `stage` and `error` when the child reported a failure; false when the
// descriptor closed without a report (the rank runs).
bool ReadRankChildFailure(int report_fd, int* stage, int* error);

// What failed, for a message: "chdir /x", "exec /usr/bin/x", "dropping privileges to uid
// 998 (gid 998) failed", "prctl", ... (the caller appends the error).
std::string RankChildFailureWhat(int stage, const std::string& program,
                                 const std::string& working_dir, uid_t uid, gid_t gid);

}  // namespace convoy

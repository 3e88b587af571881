// The warm trainer (a zygote): a `convoy-trainer --zygote FD` process that has loaded
// LibTorch and done its static registrations, started no thread, touched no GPU, and forks a
// rank on request, so that the rank has nothing left to load. This file is the protocol
// between the worker and it (both sides; POSIX and the standard library only).
//
// The Python forkserver (worker/exec/convoy-forkserver.py) speaks the same protocol.
//
// One SOCK_SEQPACKET socket pair; every message is one packet.
//   worker -> zygote  Spawn: argv, environment, working directory, the uid/gid to drop to;
//                     the rank's stdout and stderr (write ends) as SCM_RIGHTS.
//   zygote -> worker  'R' ready (once, when loaded); 'S' started <pid>; 'F' failed <errno>
//                     <why> (nothing is left running); 'X' exited <pid> <wait status>.
// The zygote is the parent of the ranks it forks: it reaps them and reports their exits.
// It dies with the worker (PR_SET_PDEATHSIG) and its ranks die with it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace convoy::zygote {

struct SpawnRequest {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value", the whole environment of the rank
  std::string working_dir;       // empty: the zygote's
  bool drop = false;             // drop to uid/gid after the fork (the zygote is root)
  uint32_t uid = 0;
  uint32_t gid = 0;
  // The rank's cgroup: files the child writes "0" into first (RankChildSetup).
  std::vector<std::string> cgroup_join_files;
};

struct Reply {
  char type = 0;  // 'R', 'S', 'F', 'X'
  int32_t pid = 0;
  int32_t value = 0;  // 'F': errno; 'X': the wait status
  std::string message;
};

std::string EncodeSpawn(const SpawnRequest& r);
bool DecodeSpawn(const std::string& bytes, SpawnRequest* r);
std::string EncodeReply(const Reply& r);
bool DecodeReply(const std::string& bytes, Reply* r);

// One packet, with up to 2 descriptors. False on error (errno set).
bool SendPacket(int sock, const std::string& bytes, const int* fds, int nfds);
// One packet and the descriptors that came with it (owned by the caller). Returns 1, 0 at the
// end of the stream, -1 on error (errno: EAGAIN when `sock` is non-blocking and empty).
int RecvPacket(int sock, std::string* bytes, std::vector<int>* fds);

// The largest request sent; larger environments start cold.
constexpr size_t kMaxPacket = 192 << 10;
// A rank forked from the zygote shows its own argv and environment in /proc/PID/cmdline and
// /proc/PID/environ (as a cold rank does): they are written over the zygote's, which Start
// pads to this many bytes each (in strings of at most kPadString: the kernel's limit on one
// string is 128 KiB). A rank whose argv or environment ("NAME=value\0"...) is larger starts
// cold.
constexpr size_t kArgRoom = 64 << 10;
constexpr size_t kEnvRoom = 160 << 10;
constexpr size_t kPadString = 80 << 10;

// Bytes of `strings` as /proc shows them ("a\0b\0").
inline size_t ProcBytes(const std::vector<std::string>& strings) {
  size_t n = 0;
  for (const auto& s : strings) n += s.size() + 1;
  return n;
}

// --- The worker's side.

struct Process {
  pid_t pid = -1;
  int sock = -1;  // the worker's end, close-on-exec
};

// Starts `command` (its first element a path; the warm trainer: `trainer --zygote 3`, the
// Python forkserver: `python3 convoy-forkserver.py 3`) with one more argument (padding, see
// kArgRoom), the socket as its fd 3, the environment `env` (plus padding), stdin /dev/null, in
// its own process group, with PR_SET_PDEATHSIG(SIGKILL). False with `error` set when it
// cannot. Safe to call from a multi-threaded process (the child only calls async-signal-safe
// functions before exec). With `run_as` (the caller is root), the server itself runs as that
// uid and gid (supplementary groups dropped, verified, root not regainable): a warm Python
// for a job identity is never root (its ranks then need no drop: SpawnRequest.drop false).
struct RunAs {
  uint32_t uid = 0;
  uint32_t gid = 0;
};
bool Start(const std::vector<std::string>& command, const std::vector<std::string>& env,
           Process* out, std::string* error, const RunAs* run_as = nullptr);
// The warm trainer: Start({trainer, "--zygote", "3"}, ...).
inline bool Start(const std::string& trainer, const std::vector<std::string>& env, Process* out,
                  std::string* error) {
  return Start(std::vector<std::string>{trainer, "--zygote", "3"}, env, out, error);
}

// Asks for a rank: sends `req` with `stdout_fd` and `stderr_fd` (which the caller still owns
// and closes after) and waits up to `timeout_ms` for its answer. 'X' replies read meanwhile
// are appended to `exits` as (pid, wait status). True with `pid` when the rank runs; false
// with `error` (the zygote refused, failed, timed out or is gone: `gone` true then).
bool Spawn(const Process& z, const SpawnRequest& req, int stdout_fd, int stderr_fd, int timeout_ms,
           pid_t* pid, std::vector<std::pair<pid_t, int>>* exits, std::string* error, bool* gone);

// Reads what the zygote sent without blocking: exits into `exits`, `ready` set on 'R'.
// False when the zygote's end is closed (it is gone).
bool Drain(const Process& z, std::vector<std::pair<pid_t, int>>* exits, bool* ready);

// --- The zygote's side.

// Serves requests on `sock` until the worker closes it; each rank runs
// `rank_main(argc, argv)` in a forked child set up exactly as the worker's launcher sets up a
// cold rank (rank_process/rank_child.h: own process group, stdin /dev/null, stdout/stderr as sent,
// privileges dropped, PR_SET_PDEATHSIG, every other descriptor closed, signals reset, working
// directory), with the request's environment and argv (also where /proc shows them), and
// exits with what it returns. The zygote waits on the socket and on SIGCHLD (no timer): a
// rank's exit is reported as soon as it is reaped. A request's bytes are overwritten once its
// rank is forked, so no later rank finds them in the heap it inherits. Returns the zygote's
// exit code.
int Serve(int sock, int (*rank_main)(int argc, char** argv));

}  // namespace convoy::zygote

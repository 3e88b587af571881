#include "rank_process/zygote_protocol.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rank_process/rank_child.h"

namespace convoy::zygote {
namespace {

constexpr uint32_t kMagic = 0x315a5643;  // "CVZ1"

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void PutString(std::string* out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

class Reader {
 public:
  explicit Reader(const std::string& b) : b_(b) {}
  bool U32(uint32_t* v) {
    if (b_.size() - pos_ < 4) return false;
    std::memcpy(v, b_.data() + pos_, 4);
    pos_ += 4;
    return true;
  }
  bool String(std::string* s) {
    uint32_t n = 0;
    if (!U32(&n) || b_.size() - pos_ < n) return false;
    s->assign(b_, pos_, n);
    pos_ += n;
    return true;
  }
  bool Strings(std::vector<std::string>* v) {
    uint32_t n = 0;
    if (!U32(&n) || n > 1 << 20) return false;
    v->resize(n);
    for (auto& s : *v) {
      if (!String(&s)) return false;
    }
    return true;
  }
  bool Done() const { return pos_ == b_.size(); }

 private:
  const std::string& b_;
  size_t pos_ = 0;
};

void PutStrings(std::string* out, const std::vector<std::string>& v) {
  PutU32(out, static_cast<uint32_t>(v.size()));
  for (const auto& s : v) PutString(out, s);
}

}  // namespace

std::string EncodeSpawn(const SpawnRequest& r) {
  std::string out;
  PutU32(&out, kMagic);
  PutStrings(&out, r.argv);
  PutStrings(&out, r.env);
  PutString(&out, r.working_dir);
  PutU32(&out, r.drop ? 1 : 0);
  PutU32(&out, r.uid);
  PutU32(&out, r.gid);
  PutStrings(&out, r.cgroup_join_files);
  return out;
}

bool DecodeSpawn(const std::string& bytes, SpawnRequest* r) {
  Reader in(bytes);
  uint32_t magic = 0, drop = 0;
  return in.U32(&magic) && magic == kMagic && in.Strings(&r->argv) && !r->argv.empty() &&
         in.Strings(&r->env) && in.String(&r->working_dir) && in.U32(&drop) && in.U32(&r->uid) &&
         in.U32(&r->gid) && in.Strings(&r->cgroup_join_files) && in.Done() &&
         ((r->drop = drop != 0), true);
}

std::string EncodeReply(const Reply& r) {
  std::string out;
  PutU32(&out, kMagic);
  PutU32(&out, static_cast<uint32_t>(r.type));
  PutU32(&out, static_cast<uint32_t>(r.pid));
  PutU32(&out, static_cast<uint32_t>(r.value));
  PutString(&out, r.message);
  return out;
}

bool DecodeReply(const std::string& bytes, Reply* r) {
  Reader in(bytes);
  uint32_t magic = 0, type = 0, pid = 0, value = 0;
  if (!in.U32(&magic) || magic != kMagic || !in.U32(&type) || !in.U32(&pid) || !in.U32(&value) ||
      !in.String(&r->message) || !in.Done()) {
    return false;
  }
  r->type = static_cast<char>(type);
  r->pid = static_cast<int32_t>(pid);
  r->value = static_cast<int32_t>(value);
  return true;
}

bool SendPacket(int sock, const std::string& bytes, const int* fds, int nfds) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(static_cast<size_t>(nfds) * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(static_cast<size_t>(nfds) * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, static_cast<size_t>(nfds) * sizeof(int));
  }
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(bytes.size());
}

int RecvPacket(int sock, std::string* bytes, std::vector<int>* fds) {
  bytes->resize(kMaxPacket);
  iovec iov{bytes->data(), bytes->size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -1;
  bytes->resize(static_cast<size_t>(n));
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds->push_back(fd);
    }
  }
  if ((msg.msg_flags & MSG_TRUNC) != 0) {
    errno = EMSGSIZE;
    return -1;
  }
  return n == 0 ? 0 : 1;
}

bool Start(const std::vector<std::string>& command, const std::vector<std::string>& env,
           Process* out, std::string* error, const RunAs* run_as) {
  if (command.empty()) {
    *error = "no command";
    return false;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    *error = std::string("socketpair: ") + std::strerror(errno);
    return false;
  }
  // Everything the child needs, built before the fork.
  // Room for each rank's arguments and environment where /proc shows them (see Serve).
  const std::string arg_pad(kArgRoom, ' ');
  std::vector<std::string> env_pads;
  for (size_t i = 0; i * kPadString < kEnvRoom; ++i) {
    env_pads.push_back("CONVOY_ZYGOTE_PAD" + std::to_string(i) + "=" +
                       std::string(kPadString, 'x'));
  }
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(const_cast<char*>(arg_pad.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  for (const auto& e : env_pads) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const bool drop = run_as != nullptr;
  const uid_t uid = drop ? run_as->uid : 0;
  const gid_t gid = drop ? run_as->gid : 0;
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    close(sv[0]);
    close(sv[1]);
    return false;
  }
  if (pid == 0) {
    setpgid(0, 0);
    if (drop) {  // groups, gid, then uid (which ends root); verified
      if (setgroups(1, &gid) != 0 || setgid(gid) != 0 || setuid(uid) != 0 || getuid() != uid ||
          geteuid() != uid || getgid() != gid || getegid() != gid || (uid != 0 && setuid(0) == 0)) {
        _exit(127);
      }
    }
    // After the drop, which clears it.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    const int devnull = open("/dev/null", O_RDWR);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(sv[1], 3) < 0) _exit(127);
    if (syscall(SYS_close_range, 4, ~0U, 0) != 0) {
      for (int fd = 4; fd < 65536; ++fd) close(fd);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) signal(s, SIG_DFL);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(sv[1]);
  setpgid(pid, pid);
  out->pid = pid;
  out->sock = sv[0];
  return true;
}

namespace {

// Handles one reply read by the worker; true when it answered the pending Spawn.
bool OnReply(const Reply& r, pid_t* pid, std::vector<std::pair<pid_t, int>>* exits,
             std::string* error, bool* ready) {
  switch (r.type) {
    case 'R':
      if (ready != nullptr) *ready = true;
      return false;
    case 'X':
      exits->emplace_back(r.pid, r.value);
      return false;
    case 'S':
      *pid = r.pid;
      return true;
    case 'F':
      *error = r.message + ": " + std::strerror(r.value);
      *pid = -1;
      return true;
    default:
      return false;
  }
}

}  // namespace

bool Spawn(const Process& z, const SpawnRequest& req, int stdout_fd, int stderr_fd, int timeout_ms,
           pid_t* pid, std::vector<std::pair<pid_t, int>>* exits, std::string* error, bool* gone) {
  *gone = false;
  const std::string bytes = EncodeSpawn(req);
  if (bytes.size() > kMaxPacket) {
    *error = "the request is too large for the warm trainer";
    return false;
  }
  const int fds[2] = {stdout_fd, stderr_fd};
  if (!SendPacket(z.sock, bytes, fds, 2)) {
    *error = std::string("sending to the warm trainer: ") + std::strerror(errno);
    *gone = true;
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      *error = "the warm trainer did not answer within " + std::to_string(timeout_ms) + " ms";
      *gone = true;
      return false;
    }
    pollfd p{z.sock, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    std::string packet;
    std::vector<int> got;
    const int n = RecvPacket(z.sock, &packet, &got);
    for (int fd : got) close(fd);
    if (n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      *error = "the warm trainer is gone";
      *gone = true;
      return false;
    }
    Reply r;
    if (DecodeReply(packet, &r) && OnReply(r, pid, exits, error, nullptr)) return *pid > 0;
  }
}

bool Drain(const Process& z, std::vector<std::pair<pid_t, int>>* exits, bool* ready) {
  while (true) {
    pollfd p{z.sock, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return true;
    std::string packet;
    std::vector<int> got;
    const int n = RecvPacket(z.sock, &packet, &got);
    for (int fd : got) close(fd);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
    if (n < 0) return true;
    Reply r;
    pid_t ignored = 0;
    std::string unused;
    if (DecodeReply(packet, &r)) OnReply(r, &ignored, exits, &unused, ready);
  }
}

namespace {

// Where the kernel shows this process's arguments and environment (/proc/PID/cmdline and
// /proc/PID/environ, what ps and the tools that find a job's processes read): the strings
// the zygote was exec'd with, padded (Start) so that a rank's own fit.
struct ProcView {
  char* arg_start = nullptr;
  char* arg_end = nullptr;
  char* env_start = nullptr;
  char* env_end = nullptr;
};

ProcView ReadProcView() {
  ProcView v;
  std::FILE* f = std::fopen("/proc/self/stat", "r");
  if (f == nullptr) return v;
  char buf[2048];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return v;
  // Fields after the command name: state is field 3; arg_start is field 48.
  unsigned long long fields[52] = {};
  int field = 2;
  for (const char* s = p + 1; *s != '\0' && field < 51;) {
    while (*s == ' ') ++s;
    ++field;
    fields[field] = std::strtoull(s, nullptr, 10);
    while (*s != ' ' && *s != '\0') ++s;
  }
  if (field < 51) return v;
  v.arg_start = reinterpret_cast<char*>(fields[48]);
  v.arg_end = reinterpret_cast<char*>(fields[49]);
  v.env_start = reinterpret_cast<char*>(fields[50]);
  v.env_end = reinterpret_cast<char*>(fields[51]);
  return v;
}

// Writes `items` ("a\0b\0") over [start, end), the rest NUL. False when they do not fit.
bool Rewrite(char* start, char* end, const std::vector<std::string>& items) {
  if (start == nullptr || end <= start) return false;
  size_t need = 0;
  for (const auto& s : items) need += s.size() + 1;
  if (need > static_cast<size_t>(end - start)) return false;
  char* at = start;
  for (const auto& s : items) {
    std::memcpy(at, s.c_str(), s.size() + 1);
    at += s.size() + 1;
  }
  std::memset(at, 0, static_cast<size_t>(end - at));
  return true;
}

ProcView g_view;

// The child's set-up, exactly as the worker's POSIX launcher does it for a cold rank
// (rank_process/rank_child.h); then the rank.
[[noreturn]] void RunChild(const SpawnRequest& req, int out_fd, int err_fd, int report,
                           pid_t zygote, int (*rank_main)(int, char**)) {
  // /proc shows the rank's argv and environment, as for a cold rank.
  if (!Rewrite(g_view.arg_start, g_view.arg_end, req.argv) ||
      !Rewrite(g_view.env_start, g_view.env_end, req.env)) {
    errno = E2BIG;
    FailRankChild(report, kRankChildProcView);
  }
  RankChildSetup setup;
  setup.stdout_fd = out_fd;
  setup.stderr_fd = err_fd;
  setup.report_fd = report;
  setup.drop = req.drop;
  setup.uid = req.uid;
  setup.gid = req.gid;
  setup.parent = zygote;
  setup.working_dir = req.working_dir.c_str();
  std::vector<const char*> join_files;
  for (const auto& f : req.cgroup_join_files) join_files.push_back(f.c_str());
  join_files.push_back(nullptr);
  setup.cgroup_join_files = join_files.data();
  SetUpRankChild(setup);  // the report descriptor is 3 from here on
  // The zygote is single-threaded: allocating after the fork is safe here.
  clearenv();
  for (const auto& e : req.env) putenv(strdup(e.c_str()));
  std::vector<char*> argv;
  for (const auto& a : req.argv) argv.push_back(strdup(a.c_str()));
  argv.push_back(nullptr);
  close(3);  // the rank runs: nothing to report
  std::exit(rank_main(static_cast<int>(req.argv.size()), argv.data()));
}

// Overwrites a string's bytes (all of its capacity) before it is freed: a rank forked later
// inherits the zygote's heap, and must not find an earlier rank's argv or environment in it.
void Scrub(std::string* s) {
  s->resize(s->capacity());
  explicit_bzero(s->data(), s->size());
  s->clear();
}

void Scrub(SpawnRequest* r) {
  for (auto& a : r->argv) Scrub(&a);
  for (auto& e : r->env) Scrub(&e);
  Scrub(&r->working_dir);
}

// SIGCHLD wakes the zygote's poll through this pipe (its write end), so that a rank's exit
// is reported at once rather than at the next turn of a timer.
int g_sigchld_pipe = -1;

void OnSigchld(int) {
  const int saved = errno;
  const char c = 0;
  ssize_t ignored = write(g_sigchld_pipe, &c, 1);
  (void)ignored;
  errno = saved;
}

}  // namespace

int Serve(int sock, int (*rank_main)(int argc, char** argv)) {
  signal(SIGPIPE, SIG_IGN);
  g_view = ReadProcView();
  const pid_t self = getpid();
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  g_sigchld_pipe = wake[1];
  struct sigaction on_child {};
  on_child.sa_handler = OnSigchld;
  sigemptyset(&on_child.sa_mask);
  on_child.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &on_child, nullptr);
  SendPacket(sock, EncodeReply({'R', 0, 0, ""}), nullptr, 0);
  while (true) {
    int status = 0;
    pid_t done;
    while ((done = waitpid(-1, &status, WNOHANG)) > 0) {
      SendPacket(sock, EncodeReply({'X', done, status, ""}), nullptr, 0);
    }
    // No timeout: a request or a child's exit (SIGCHLD) wakes it.
    pollfd p[2] = {{sock, POLLIN, 0}, {wake[0], POLLIN, 0}};
    if (poll(p, 2, -1) <= 0) continue;
    if (p[1].revents != 0) {
      char buf[64];
      while (read(wake[0], buf, sizeof(buf)) > 0) {
      }
    }
    if (p[0].revents == 0) continue;
    std::string packet;
    std::vector<int> fds;
    const int n = RecvPacket(sock, &packet, &fds);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return 0;  // the worker left
    SpawnRequest req;
    if (n < 0 || fds.size() != 2 || !DecodeSpawn(packet, &req)) {
      for (int fd : fds) close(fd);
      Scrub(&packet);
      Scrub(&req);
      if (n > 0) SendPacket(sock, EncodeReply({'F', 0, EINVAL, "a malformed request"}), nullptr, 0);
      continue;
    }
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
      SendPacket(sock, EncodeReply({'F', 0, errno, "pipe"}), nullptr, 0);
      for (int fd : fds) close(fd);
      Scrub(&packet);
      Scrub(&req);
      continue;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      close(report[0]);
      RunChild(req, fds[0], fds[1], report[1], self, rank_main);
    }
    const int fork_errno = errno;
    close(report[1]);
    for (int fd : fds) close(fd);
    Reply reply{'S', pid, 0, ""};
    if (pid < 0) {
      reply = {'F', 0, fork_errno, "fork"};
    } else {
      setpgid(pid, pid);
      int stage = 0, error = 0;
      if (ReadRankChildFailure(report[0], &stage, &error)) {
        waitpid(pid, nullptr, 0);
        reply = {'F', 0, error,
                 RankChildFailureWhat(stage, req.argv[0], req.working_dir, req.uid, req.gid)};
      }
    }
    close(report[0]);
    std::string bytes = EncodeReply(reply);
    SendPacket(sock, bytes, nullptr, 0);
    // Nothing of this request stays in the zygote for the next rank to find (the reply may
    // name its working directory).
    Scrub(&packet);
    Scrub(&req);
    Scrub(&reply.message);
    Scrub(&bytes);
  }
}

}  // namespace convoy::zygote

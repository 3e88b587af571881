#include "worker/supervisor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>

#include "common/trainer_argv.h"
#include "common/util.h"
#include "worker/metrics_parse.h"

extern char** environ;

namespace convoy {
namespace {

constexpr size_t kStderrTailLines = 20;
constexpr size_t kMaxPendingRecords = 10000;
constexpr int kFlushIntervalMs = 200;
constexpr int64_t kKeepExitedMs = 3600 * 1000;

std::map<std::string, std::string> ProcessEnv() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  return env;
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

std::map<std::string, std::string> BuildRankEnv(const std::map<std::string, std::string>& base,
                                                const v1::Launch& launch, int local_rank, int cores,
                                                const std::string& metrics_socket,
                                                const std::string& checkpoint_dir) {
  std::map<std::string, std::string> env = base;
  for (const auto& [k, v] : launch.spec().env()) env[k] = v;
  if (env.count("OMP_NUM_THREADS") == 0) {
    env["OMP_NUM_THREADS"] =
        std::to_string(std::max(1, cores / std::max(1, launch.local_world_size())));
  }
  const int rank = launch.group_rank() * launch.local_world_size() + local_rank;
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["WORLD_SIZE"] = std::to_string(launch.world_size());
  env["LOCAL_WORLD_SIZE"] = std::to_string(launch.local_world_size());
  env["GROUP_RANK"] = std::to_string(launch.group_rank());
  env["GROUP_WORLD_SIZE"] = std::to_string(launch.num_nodes());
  env["ROLE_RANK"] = std::to_string(rank);
  env["ROLE_WORLD_SIZE"] = std::to_string(launch.world_size());
  env["ROLE_NAME"] = "default";
  env["MASTER_ADDR"] = launch.master_addr();
  env["MASTER_PORT"] = std::to_string(launch.master_port());
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(launch.restart_count());
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(launch.max_restarts());
  env["TORCHELASTIC_RUN_ID"] = launch.run_id();
  env["CONVOY_JOB_ID"] = launch.job_id();
  env["CONVOY_ATTEMPT"] = std::to_string(launch.attempt());
  env["CONVOY_METRICS_SOCKET"] = metrics_socket;
  env["CONVOY_CHECKPOINT_DIR"] = checkpoint_dir;
  env["PYTHONUNBUFFERED"] = "1";
  return env;
}

Supervisor::Supervisor(WorkerConfig config, ProcessLauncher& launcher, Outbox& outbox)
    : config_(std::move(config)), launcher_(launcher), outbox_(outbox) {
  disconnected_since_ms_ = NowMs();
  if (pipe2(wake_fd_, O_CLOEXEC | O_NONBLOCK) != 0) {
    spdlog::critical("pipe: {}", strerror(errno));
    std::abort();
  }
}

Supervisor::~Supervisor() {
  Stop();
  CloseFd(wake_fd_[0]);
  CloseFd(wake_fd_[1]);
}

int64_t Supervisor::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Supervisor::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Supervisor::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  char c = 's';
  ssize_t ignored = write(wake_fd_[1], &c, 1);
  (void)ignored;
  thread_.join();
}

void Supervisor::Post(const v1::CoordinatorMessage& msg) {
  {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    commands_.push_back(msg);
  }
  char c = 'c';
  ssize_t ignored = write(wake_fd_[1], &c, 1);
  (void)ignored;
}

void Supervisor::OnConnected(int heartbeat_interval_ms) {
  heartbeat_ms_ = std::max(50, heartbeat_interval_ms);
  connected_ = true;
  if (orphaned_) spdlog::info("coordinator reachable again");
}

void Supervisor::OnDisconnected() {
  if (connected_.exchange(false)) disconnected_since_ms_ = NowMs();
}

void Supervisor::Send(const v1::WorkerMessage& msg) {
  if (connected_) outbox_.Send(msg);
}

v1::Register Supervisor::BuildRegister() {
  v1::Register reg;
  reg.set_name(config_.name);
  reg.set_address(config_.address);
  reg.set_hostname(config_.hostname);
  reg.set_cores(config_.cores);
  for (int g : config_.gpus) reg.add_gpus(g);
  reg.set_slots(config_.slots);
  reg.set_version(CONVOY_VERSION);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, a] : attempts_) {
    if (a.forgotten) continue;
    v1::AttemptStatus* as = reg.add_attempts();
    as->set_job_id(a.job_id);
    as->set_attempt(a.attempt);
    for (const Rank& r : a.ranks) {
      v1::RankStatus* rs = as->add_ranks();
      rs->set_rank(r.rank);
      rs->set_local_rank(r.local_rank);
      rs->set_pid(r.pid);
      rs->set_running(r.running);
      if (!r.running) *rs->mutable_exit() = r.exit;
    }
  }
  return reg;
}

// ---- The supervisor thread

void Supervisor::Run() {
  std::vector<pollfd> fds;
  // What each pollfd is: a callback run when it is readable.
  std::vector<std::function<void()>> handlers;
  while (true) {
    if (stopping_) {
      std::lock_guard<std::mutex> lock(mu_);
      bool any = false;
      for (auto& [key, a] : attempts_) {
        for (Rank& r : a.ranks) any = any || r.running;
      }
      if (!any) break;
      for (auto& [key, a] : attempts_) {
        bool running = false;
        for (Rank& r : a.ranks) running = running || (r.running && !r.signalled);
        if (running) KillAttempt(a, config_.kill_grace_ms);
      }
    }
    fds.clear();
    handlers.clear();
    fds.push_back({wake_fd_[0], POLLIN, 0});
    handlers.push_back([this] {
      char buf[256];
      while (read(wake_fd_[0], buf, sizeof(buf)) > 0) {
      }
      std::deque<v1::CoordinatorMessage> cmds;
      {
        std::lock_guard<std::mutex> lock(cmd_mu_);
        cmds.swap(commands_);
      }
      for (const auto& c : cmds) Handle(c);
    });
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, a] : attempts_) {
        Attempt* ap = &a;
        if (a.listen_fd >= 0) {
          fds.push_back({a.listen_fd, POLLIN, 0});
          handlers.push_back([this, ap] { AcceptMetrics(*ap); });
        }
        for (size_t i = 0; i < a.conns.size(); ++i) {
          fds.push_back({a.conns[i].fd, POLLIN, 0});
          const int fd = a.conns[i].fd;
          handlers.push_back([this, ap, fd] {
            for (size_t k = 0; k < ap->conns.size(); ++k) {
              if (ap->conns[k].fd == fd) {
                ReadMetrics(*ap, ap->conns[k]);  // may erase it: look no further
                break;
              }
            }
          });
        }
        for (Rank& r : a.ranks) {
          Rank* rp = &r;
          if (r.out_fd >= 0) {
            fds.push_back({r.out_fd, POLLIN, 0});
            handlers.push_back([this, rp] { PumpOutput(*rp, rp->out_fd, false); });
          }
          if (r.err_fd >= 0) {
            fds.push_back({r.err_fd, POLLIN, 0});
            handlers.push_back([this, rp] { PumpOutput(*rp, rp->err_fd, true); });
          }
        }
      }
    }
    int n = poll(fds.data(), fds.size(), 50);
    if (n < 0 && errno != EINTR) spdlog::error("poll: {}", strerror(errno));
    std::lock_guard<std::mutex> lock(mu_);
    if (n > 0) {
      // Handlers may add or remove attempts (commands) or connections: run the wake-up
      // handler last so that the pointers captured above stay valid while others run.
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) handlers[i]();
      }
      if (fds[0].revents & POLLIN) handlers[0]();
    }
    Reap();
    Timers();
  }
  FlushMetrics(true);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, a] : attempts_) CloseAttemptSockets(a);
}

void Supervisor::Handle(const v1::CoordinatorMessage& msg) {
  switch (msg.msg_case()) {
    case v1::CoordinatorMessage::kLaunch:
      Launch(msg.launch());
      break;
    case v1::CoordinatorMessage::kKill: {
      auto it = attempts_.find({msg.kill().job_id(), msg.kill().attempt()});
      if (it == attempts_.end()) return;
      spdlog::info("killing attempt {} of job {}: {}", msg.kill().attempt(), msg.kill().job_id(),
                   msg.kill().reason());
      KillAttempt(it->second,
                  msg.kill().grace_ms() > 0 ? msg.kill().grace_ms() : config_.kill_grace_ms);
      break;
    }
    case v1::CoordinatorMessage::kReservePort:
      ReservePort(msg.reserve_port());
      break;
    case v1::CoordinatorMessage::kReadLogs:
      ReadLogs(msg.read_logs());
      break;
    case v1::CoordinatorMessage::kForgetAttempt: {
      auto it = attempts_.find({msg.forget_attempt().job_id(), msg.forget_attempt().attempt()});
      if (it != attempts_.end()) it->second.forgotten = true;
      break;
    }
    default:
      spdlog::warn("unexpected message from the coordinator (case {}); ignored",
                   static_cast<int>(msg.msg_case()));
  }
}

void Supervisor::Launch(const v1::Launch& launch) {
  const Key key{launch.job_id(), launch.attempt()};
  auto refuse = [&](int rank, const std::string& why) {
    spdlog::error("job {} attempt {}: cannot launch rank {}: {}", launch.job_id(), launch.attempt(),
                  rank, why);
    v1::WorkerMessage out;
    v1::LaunchFailed* f = out.mutable_launch_failed();
    f->set_job_id(launch.job_id());
    f->set_attempt(launch.attempt());
    f->set_rank(rank);
    f->set_error(why);
    Send(out);
  };
  const int first_rank = launch.group_rank() * launch.local_world_size();
  if (!IsValidName(launch.job_id()) || launch.attempt() < 0) {
    refuse(first_rank, "invalid job id or attempt");
    return;
  }
  if (launch.local_world_size() < 1 || launch.local_world_size() > 1024 ||
      launch.local_world_size() > std::max(1, config_.slots) * 4 || launch.world_size() < 1) {
    refuse(first_rank, "local_world_size " + std::to_string(launch.local_world_size()) +
                           " does not fit this worker's " + std::to_string(config_.slots) +
                           " slots");
    return;
  }
  if (attempts_.count(key) != 0) return;  // a duplicate launch
  std::vector<std::string> argv = BuildArgv(launch.spec(), config_.trainer_path);
  if (argv.empty() || argv[0].empty()) {
    refuse(first_rank, "the job has an empty command");
    return;
  }
  Attempt& a = attempts_[key];
  a.job_id = launch.job_id();
  a.attempt = launch.attempt();
  a.dir = config_.work_dir + "/jobs/" + launch.job_id() + "/attempt-" +
          std::to_string(launch.attempt());
  std::error_code ec;
  std::filesystem::create_directories(a.dir, ec);
  const std::string checkpoint_dir = launch.spec().checkpoint_dir().empty()
                                         ? config_.work_dir + "/checkpoints/" + launch.job_id()
                                         : launch.spec().checkpoint_dir();
  std::filesystem::create_directories(checkpoint_dir, ec);

  // The attempt's metrics socket.
  std::string sock = config_.work_dir + "/run/" + launch.job_id() + "." +
                     std::to_string(launch.attempt()) + ".sock";
  if (sock.size() >= sizeof(sockaddr_un::sun_path)) {
    const std::string dir = "/tmp/convoy-" + std::to_string(getuid());
    std::filesystem::create_directories(dir, ec);
    sock = dir + "/" + std::to_string(std::hash<std::string>()(sock)) + ".sock";
  }
  std::filesystem::create_directories(std::filesystem::path(sock).parent_path(), ec);
  unlink(sock.c_str());
  a.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock.c_str(), sizeof(addr.sun_path) - 1);
  if (a.listen_fd < 0 || bind(a.listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(a.listen_fd, 64) != 0) {
    spdlog::warn("metrics socket {}: {}; ranks will report no metrics", sock, strerror(errno));
    CloseFd(a.listen_fd);
  } else {
    a.socket_path = sock;
  }

  const auto base_env = ProcessEnv();
  for (int l = 0; l < launch.local_world_size(); ++l) {
    Rank r;
    r.local_rank = l;
    r.rank = first_rank + l;
    LaunchRequest req;
    req.argv = argv;
    req.env = BuildRankEnv(base_env, launch, l, config_.cores, a.socket_path, checkpoint_dir);
    req.working_dir = launch.spec().working_dir().empty() ? a.dir : launch.spec().working_dir();
    r.log_path = a.dir + "/rank-" + std::to_string(r.rank) + ".log";
    r.log_fd = open(r.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    auto started = launcher_.Launch(req);
    if (!started.ok()) {
      r.exit.set_exit_code(127);
      r.exit.add_stderr_tail(started.status().message());
      WriteLog(r, started.status().message().data(), started.status().message().size());
      CloseFd(r.log_fd);
      a.ranks.push_back(std::move(r));
      a.ended_ms = NowMs();
      refuse(first_rank + l, started.status().message());
      continue;
    }
    r.pid = started->pid;
    r.out_fd = started->stdout_fd;
    r.err_fd = started->stderr_fd;
    r.running = true;
    spdlog::info("job {} attempt {}: rank {} started, pid {}", a.job_id, a.attempt, r.rank, r.pid);
    v1::WorkerMessage out;
    v1::ProcessStarted* s = out.mutable_process_started();
    s->set_job_id(a.job_id);
    s->set_attempt(a.attempt);
    s->set_rank(r.rank);
    s->set_local_rank(l);
    s->set_pid(r.pid);
    a.ranks.push_back(std::move(r));
    Send(out);
  }
}

void Supervisor::KillAttempt(Attempt& a, int64_t grace_ms) {
  for (Rank& r : a.ranks) {
    if (!r.running) continue;
    r.signalled = true;
    launcher_.SignalGroup(r.pid, SIGTERM);
    launcher_.SignalGroup(r.pid, SIGCONT);  // a stopped rank must see its SIGTERM
    const int64_t at = NowMs() + grace_ms;
    if (r.kill_at_ms == 0 || at < r.kill_at_ms) r.kill_at_ms = at;
  }
}

void Supervisor::ReservePort(const v1::ReservePort& req) {
  v1::WorkerMessage out;
  v1::PortReserved* p = out.mutable_port_reserved();
  p->set_job_id(req.job_id());
  p->set_attempt(req.attempt());
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, config_.address.c_str(), &addr.sin_addr) != 1) {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  }
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    p->set_error(std::string("bind: ") + strerror(errno));
  } else {
    p->set_port(ntohs(addr.sin_port));
  }
  if (fd >= 0) close(fd);
  Send(out);
}

void Supervisor::ReadLogs(const v1::ReadLogs& req) {
  v1::WorkerMessage out;
  v1::LogData* d = out.mutable_log_data();
  d->set_request_id(req.request_id());
  auto it = attempts_.find({req.job_id(), req.attempt()});
  std::string path;
  bool running = false;
  if (it != attempts_.end()) {
    for (const Rank& r : it->second.ranks) {
      if (r.rank == req.rank()) {
        path = r.log_path;
        running = r.running;
      }
    }
  } else if (IsValidName(req.job_id())) {
    // Not in memory any more (worker restarted, attempt forgotten): the file may still be.
    path = config_.work_dir + "/jobs/" + req.job_id() + "/attempt-" +
           std::to_string(req.attempt()) + "/rank-" + std::to_string(req.rank()) + ".log";
    if (!std::filesystem::exists(path)) path.clear();
  }
  if (path.empty()) {
    d->set_error("no log for rank " + std::to_string(req.rank()) + " of attempt " +
                 std::to_string(req.attempt()) + " of job " + req.job_id() + " on worker " +
                 config_.name);
    Send(out);
    return;
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    d->set_error(path + ": " + strerror(errno));
    if (fd >= 0) close(fd);
    Send(out);
    return;
  }
  int64_t offset = req.offset();
  if (offset < 0) offset = std::max<int64_t>(0, st.st_size + offset);
  offset = std::min<int64_t>(offset, st.st_size);
  const int64_t max = std::clamp<int64_t>(req.max_bytes(), 1, 1 << 20);
  std::string data(static_cast<size_t>(std::min<int64_t>(max, st.st_size - offset)), '\0');
  ssize_t n = data.empty() ? 0 : pread(fd, data.data(), data.size(), offset);
  close(fd);
  if (n < 0) n = 0;
  data.resize(static_cast<size_t>(n));
  d->set_next_offset(offset + n);
  d->set_eof(!running && offset + n >= st.st_size);
  d->set_data(std::move(data));
  Send(out);
}

void Supervisor::PumpOutput(Rank& r, int fd, bool is_stderr) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      WriteLog(r, buf, static_cast<size_t>(n));
      if (is_stderr) {
        r.err_partial.append(buf, static_cast<size_t>(n));
        size_t pos;
        while ((pos = r.err_partial.find('\n')) != std::string::npos) {
          r.stderr_tail.push_back(r.err_partial.substr(0, std::min<size_t>(pos, 4096)));
          r.err_partial.erase(0, pos + 1);
          if (r.stderr_tail.size() > kStderrTailLines) r.stderr_tail.pop_front();
        }
        if (r.err_partial.size() > 4096) r.err_partial.resize(4096);
      }
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      // EOF: the rank (and everything that inherited the pipe) closed it.
      if (fd == r.out_fd) {
        CloseFd(r.out_fd);
      } else if (fd == r.err_fd) {
        CloseFd(r.err_fd);
      }
    }
    return;
  }
}

void Supervisor::WriteLog(Rank& r, const char* data, size_t n) {
  if (r.log_fd < 0) return;
  if (r.log_bytes + static_cast<int64_t>(n) > config_.log_max_bytes) {
    // Rotation: rank-R.log -> rank-R.log.1 (the previous .1 is dropped).
    close(r.log_fd);
    std::rename(r.log_path.c_str(), (r.log_path + ".1").c_str());
    r.log_fd = open(r.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    r.log_bytes = 0;
    if (r.log_fd < 0) return;
  }
  ssize_t w = write(r.log_fd, data, n);
  if (w > 0) r.log_bytes += w;
}

void Supervisor::Reap() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (auto& [key, a] : attempts_) {
      for (Rank& r : a.ranks) {
        if (r.running && r.pid == pid) OnExit(a, r, status);
      }
    }
  }
}

void Supervisor::OnExit(Attempt& a, Rank& r, int status) {
  r.running = false;
  // Whatever is left in the pipes belongs to the log and the stderr tail.
  if (r.out_fd >= 0) PumpOutput(r, r.out_fd, false);
  if (r.err_fd >= 0) PumpOutput(r, r.err_fd, true);
  CloseFd(r.out_fd);
  CloseFd(r.err_fd);
  if (!r.err_partial.empty()) {
    r.stderr_tail.push_back(r.err_partial);
    r.err_partial.clear();
    if (r.stderr_tail.size() > kStderrTailLines) r.stderr_tail.pop_front();
  }
  CloseFd(r.log_fd);
  // Children the rank left behind in its process group go with it.
  launcher_.SignalGroup(r.pid, SIGKILL);
  r.exit.Clear();
  if (WIFSIGNALED(status)) {
    r.exit.set_signal(WTERMSIG(status));
    r.exit.set_signal_name(SignalName(WTERMSIG(status)));
  } else {
    r.exit.set_exit_code(WEXITSTATUS(status));
  }
  r.exit.set_killed_by_worker(r.signalled);
  for (const auto& line : r.stderr_tail) r.exit.add_stderr_tail(line);
  spdlog::info("job {} attempt {}: rank {} (pid {}) {}", a.job_id, a.attempt, r.rank, r.pid,
               r.exit.signal() != 0 ? "killed by " + r.exit.signal_name()
                                    : "exited with code " + std::to_string(r.exit.exit_code()));
  bool all_done = true;
  for (const Rank& other : a.ranks) all_done = all_done && !other.running;
  if (all_done) {
    a.ended_ms = NowMs();
    FlushMetrics(true);
  }
  v1::WorkerMessage out;
  v1::ProcessExited* e = out.mutable_process_exited();
  e->set_job_id(a.job_id);
  e->set_attempt(a.attempt);
  e->set_rank(r.rank);
  e->set_local_rank(r.local_rank);
  e->set_pid(r.pid);
  *e->mutable_exit() = r.exit;
  Send(out);
  if (all_done) CloseAttemptSockets(a);
}

void Supervisor::CloseAttemptSockets(Attempt& a) {
  for (auto& c : a.conns) CloseFd(c.fd);
  a.conns.clear();
  if (a.listen_fd >= 0) {
    CloseFd(a.listen_fd);
    unlink(a.socket_path.c_str());
  }
}

void Supervisor::AcceptMetrics(Attempt& a) {
  for (;;) {
    int fd = accept4(a.listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    MetricConn c;
    c.fd = fd;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      const pid_t pgid = getpgid(cred.pid);
      for (const Rank& r : a.ranks) {
        if (r.pid == cred.pid || (pgid > 0 && r.pid == pgid)) c.rank = r.rank;
      }
    }
    if (a.conns.size() >= 4096) {
      close(fd);
      continue;
    }
    a.conns.push_back(std::move(c));
  }
}

void Supervisor::ReadMetrics(Attempt& a, MetricConn& c) {
  char buf[65536];
  bool closed = false;
  for (;;) {
    ssize_t n = read(c.fd, buf, sizeof(buf));
    if (n > 0) {
      c.buffer.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) closed = true;
    break;
  }
  size_t pos;
  static int64_t warned = 0;
  while ((pos = c.buffer.find('\n')) != std::string::npos) {
    std::string line = c.buffer.substr(0, pos);
    c.buffer.erase(0, pos + 1);
    auto rec = ParseMetricLine(line);
    if (!rec.ok()) {
      if (warned++ < 20) {
        spdlog::warn("job {}: dropped a metric line: {}", a.job_id, rec.status().message());
      }
      continue;
    }
    if (c.rank >= 0) rec->set_rank(c.rank);
    rec->set_attempt(a.attempt);
    rec->set_time_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
    a.pending.push_back(std::move(*rec));
    if (a.pending.size() > kMaxPendingRecords) a.pending.erase(a.pending.begin());
  }
  if (c.buffer.size() > kMaxMetricLineBytes) {
    if (warned++ < 20) spdlog::warn("job {}: dropped an over-long metric line", a.job_id);
    c.buffer.clear();
  }
  if (closed) {
    CloseFd(c.fd);
    a.conns.erase(std::remove_if(a.conns.begin(), a.conns.end(),
                                 [](const MetricConn& m) { return m.fd < 0; }),
                  a.conns.end());
  }
}

void Supervisor::FlushMetrics(bool force) {
  const int64_t now = NowMs();
  if (!force && now < next_flush_ms_) return;
  next_flush_ms_ = now + kFlushIntervalMs;
  if (!connected_) return;  // kept (bounded) until the coordinator is back
  for (auto& [key, a] : attempts_) {
    size_t start = 0;
    while (start < a.pending.size()) {
      v1::WorkerMessage out;
      v1::MetricBatch* b = out.mutable_metrics();
      b->set_job_id(a.job_id);
      b->set_attempt(a.attempt);
      const size_t end = std::min(a.pending.size(), start + 500);
      for (size_t i = start; i < end; ++i) *b->add_records() = a.pending[i];
      if (!outbox_.Send(out)) return;
      start = end;
    }
    a.pending.clear();
  }
}

void Supervisor::Timers() {
  const int64_t now = NowMs();
  for (auto& [key, a] : attempts_) {
    for (Rank& r : a.ranks) {
      if (r.running && r.kill_at_ms != 0 && now >= r.kill_at_ms) {
        spdlog::warn("job {} attempt {}: rank {} outlived its grace; SIGKILL", a.job_id, a.attempt,
                     r.rank);
        launcher_.SignalGroup(r.pid, SIGKILL);
        r.kill_at_ms = now + 1000;  // again later if it is still there
      }
    }
  }
  if (connected_ && now >= next_heartbeat_ms_) {
    next_heartbeat_ms_ = now + heartbeat_ms_;
    v1::WorkerMessage hb;
    hb.mutable_heartbeat()->set_time_unix_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    outbox_.Send(hb);
  }
  FlushMetrics(false);
  // No coordinator for too long: training on its own would never be reported or stopped.
  if (!connected_ && !orphaned_ && now - disconnected_since_ms_ > config_.orphan_timeout_ms) {
    bool any = false;
    for (auto& [key, a] : attempts_) {
      for (Rank& r : a.ranks) any = any || r.running;
    }
    if (any) {
      spdlog::error("no coordinator for {} ms (--orphan-timeout): stopping every rank",
                    config_.orphan_timeout_ms);
      for (auto& [key, a] : attempts_) KillAttempt(a, config_.kill_grace_ms);
    }
    orphaned_ = true;
  }
  if (connected_) orphaned_ = false;
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    bool running = false;
    for (const Rank& r : it->second.ranks) running = running || r.running;
    const bool old = it->second.ended_ms != 0 && now - it->second.ended_ms > kKeepExitedMs;
    if (!running && (old || (it->second.forgotten && it->second.pending.empty()))) {
      CloseAttemptSockets(it->second);
      it = attempts_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace convoy

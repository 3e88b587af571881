#include "worker/host/health.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "worker/host/nvml.h"

namespace convoy {

namespace {

std::string Gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string Size(int64_t bytes) { return bytes >= (int64_t{1} << 30) ? Gib(bytes) : Mib(bytes); }

// Free bytes for an unprivileged writer at `path`, or -1 (errno set).
int64_t FreeBytes(const std::string& path) {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

// The first `lines` lines of `text`, joined with " | ", without trailing blanks.
std::string FirstLines(const std::string& text, int lines) {
  std::string out;
  size_t start = 0;
  for (int i = 0; i < lines && start < text.size(); ++i) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) out += (out.empty() ? "" : " | ") + line;
    start = end + 1;
  }
  return out;
}

}  // namespace

HealthCheckOutcome CheckFreeSpace(const std::string& name, const std::string& path,
                                  int64_t min_free) {
  HealthCheckOutcome out{name, true, ""};
  // A directory made on first use (the snapshot root, a job root) is measured on the file
  // system it will be made on: its nearest existing ancestor's.
  std::string at = path;
  while (access(at.c_str(), F_OK) != 0 && errno == ENOENT && at.size() > 1) {
    const size_t slash = at.find_last_of('/');
    at = slash == 0 || slash == std::string::npos ? "/" : at.substr(0, slash);
  }
  const int64_t free = FreeBytes(at);
  if (free < 0) {
    out.ok = false;
    out.detail = path + ": " + std::strerror(errno);
  } else {
    out.ok = free >= min_free;
    out.detail =
        Size(free) + " free in " + path + (out.ok ? "" : " (needs " + Size(min_free) + ")");
  }
  return out;
}

HealthCheckOutcome CheckShm(const std::string& dir, int64_t min_free) {
  HealthCheckOutcome out = CheckFreeSpace("shm", dir, min_free);
  if (!out.ok) return out;
  std::string probe = dir + "/.convoy-health-XXXXXX";
  const int fd = mkstemp(probe.data());
  if (fd < 0) {
    out.ok = false;
    out.detail = "cannot make a file in " + dir + ": " + std::strerror(errno);
    return out;
  }
  close(fd);
  unlink(probe.c_str());
  return out;
}

HealthCheckOutcome RunHealthProgram(const std::string& program, int64_t timeout_ms,
                                    std::atomic<pid_t>* running) {
  HealthCheckOutcome out{"program", false, ""};
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    out.detail = std::string("cannot make a pipe: ") + std::strerror(errno);
    return out;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    out.detail = std::string("cannot fork: ") + std::strerror(errno);
    close(pipefd[0]);
    close(pipefd[1]);
    return out;
  }
  if (pid == 0) {
    setpgid(0, 0);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    execl("/bin/sh", "sh", "-c", program.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // either side may run first
  if (running != nullptr) running->store(pid);
  close(pipefd[1]);
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  bool reaped = false;
  int status = 0;
  bool open_pipe = true;
  while (!reaped) {
    // The program ends when its shell does: a child it left behind may hold the pipe open.
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      reaped = true;
    } else if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    if (!open_pipe) {
      if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    pollfd p{pipefd[0], POLLIN, 0};
    if (poll(&p, 1, reaped ? 0 : 20) <= 0) continue;
    char buf[4096];
    const ssize_t got = read(pipefd[0], buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      open_pipe = false;
      continue;
    }
    if (output.size() < 16384) output.append(buf, static_cast<size_t>(got));
  }
  close(pipefd[0]);
  kill(-pid, SIGKILL);  // a program that overran, and what it left in its group
  if (!reaped) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (running != nullptr) running->store(0);
  const std::string said = FirstLines(output, 3);
  if (timed_out) {
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%.1f s", static_cast<double>(timeout_ms) / 1000);
    out.detail =
        "'" + program + "' did not finish within " + limit + (said.empty() ? "" : ": " + said);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    out.ok = true;
    out.detail = said.empty() ? "passed" : said;
  } else {
    const std::string how = WIFEXITED(status)
                                ? "exited with code " + std::to_string(WEXITSTATUS(status))
                                : "killed by signal " + std::to_string(WTERMSIG(status));
    out.detail = said.empty() ? "'" + program + "' " + how : said + " (" + how + ")";
  }
  return out;
}

std::vector<HealthCheckOutcome> CheckGpus(const Nvml* nvml) {
  std::vector<HealthCheckOutcome> out;
  if (nvml == nullptr) return out;
  for (const GpuHealth& g : nvml->Health()) {
    HealthCheckOutcome o{"gpu", true, "GPU " + std::to_string(g.index) + ": "};
    if (g.uncorrected_ecc_errors > 0) {
      o.ok = false;
      o.detail += std::to_string(g.uncorrected_ecc_errors) + " uncorrected ECC error(s)";
    } else if (g.retired_pages_pending) {
      o.ok = false;
      o.detail += "a page retirement is pending (reset the GPU)";
    } else {
      o.detail += "no uncorrected ECC errors";
    }
    out.push_back(std::move(o));
  }
  return out;
}

HealthReport RunHealthChecks(const HealthOptions& options, const Nvml* nvml, const Clock& clock,
                             std::atomic<pid_t>* running) {
  HealthReport report;
  for (const auto& [name, path] : options.disks) {
    report.checks.push_back(CheckFreeSpace(name, path, options.min_free_bytes));
  }
  if (!options.shm_dir.empty()) {
    report.checks.push_back(CheckShm(options.shm_dir, options.shm_min_free_bytes));
  }
  for (HealthCheckOutcome& g : CheckGpus(nvml)) report.checks.push_back(std::move(g));
  if (!options.device_program.empty()) {
    HealthCheckOutcome kernel =
        RunHealthProgram(options.device_program, options.program_timeout_ms, running);
    kernel.name = "gpu:kernel";
    report.checks.push_back(std::move(kernel));
  }
  if (!options.program.empty()) {
    report.checks.push_back(RunHealthProgram(options.program, options.program_timeout_ms, running));
  }
  report.state = HealthReport::State::kOk;
  for (const HealthCheckOutcome& c : report.checks) {
    if (c.ok) continue;
    report.state = HealthReport::State::kFailing;
    report.reason += (report.reason.empty() ? "" : "; ") + c.name + ": " + c.detail;
  }
  report.checked_unix_ms = clock.NowUnixMs();
  return report;
}

std::string DescribeHealth(const HealthReport& report) {
  switch (report.state) {
    case HealthReport::State::kChecking:
      return "checking";
    case HealthReport::State::kOk:
      return "healthy";
    case HealthReport::State::kFailing:
      return "unhealthy: " + report.reason;
  }
  return "unknown";
}

HealthMonitor::HealthMonitor(HealthOptions options, const Nvml* nvml, const Clock& clock,
                             std::function<void(const HealthReport&)> on_change)
    : options_(std::move(options)),
      nvml_(nvml),
      clock_(clock),
      on_change_(std::move(on_change)),
      thread_([this] { Loop(); }) {}

HealthMonitor::~HealthMonitor() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  // A program under way is killed rather than waited for (its check's outcome is not used).
  if (const pid_t pg = running_.load(); pg > 0) kill(-pg, SIGKILL);
  thread_.join();
}

HealthReport HealthMonitor::Latest() const {
  MutexLock lock(mu_);
  return latest_;
}

void HealthMonitor::CheckNow() {
  MutexLock lock(mu_);
  check_now_ = true;
  cv_.SignalAll();
}

void HealthMonitor::Loop() {
  for (;;) {
    {
      MutexLock lock(mu_);
      check_now_ = false;  // a CheckNow from here on asks for the next run
    }
    HealthReport report = RunHealthChecks(options_, nvml_, clock_, &running_);
    bool changed = false;
    {
      MutexLock lock(mu_);
      if (stopping_) return;
      changed = report.state != latest_.state || report.reason != latest_.reason;
      latest_ = report;
    }
    if (changed && on_change_) on_change_(report);
    MutexLock lock(mu_);
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.interval_ms);
    while (!stopping_ && !check_now_ && std::chrono::steady_clock::now() < until) {
      cv_.WaitFor(mu_, until - std::chrono::steady_clock::now());
    }
    if (stopping_) return;
  }
}

}  // namespace convoy

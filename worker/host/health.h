// A worker's health (README "When nodes are sick"): built-in checks of this machine (free
// space where ranks write, /dev/shm, the GPUs' uncorrected ECC errors and pending page
// retirements through NVML) and the operator's own program (--health-check), run before the
// worker accepts ranks and every --health-check-interval by a HealthMonitor on a thread of its
// own, so that a slow or hanging check never delays a heartbeat or a launch. The supervisor
// reads the newest report for each Register and Heartbeat; the coordinator places no rank on
// a worker whose report is not OK.
//
// Threading: the free functions are pure but for the file system and the program they run;
// HealthMonitor's Latest from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"

namespace convoy {

class Nvml;

struct HealthCheckOutcome {
  std::string
      name;  // "disk:work-dir", "disk:job-root", "disk:snapshot-dir", "shm", "gpu", "program"
  bool ok = true;
  std::string detail;  // what it found ("12.0 GiB free"), or why it failed
};

struct HealthReport {
  enum class State { kChecking, kOk, kFailing };
  State state = State::kChecking;
  std::string reason;  // the failed checks, "name: detail; ..." (empty unless kFailing)
  int64_t checked_unix_ms = 0;
  std::vector<HealthCheckOutcome> checks;
};

struct HealthOptions {
  // Directories that must keep at least min_free_bytes free, by check name.
  std::vector<std::pair<std::string, std::string>> disks;
  int64_t min_free_bytes = int64_t{1} << 30;
  // /dev/shm (or another tmpfs) that snapshots and collectives use: at least shm_min_free_bytes
  // free and writable. Empty: not checked.
  std::string shm_dir = "/dev/shm";
  int64_t shm_min_free_bytes = int64_t{64} << 20;
  // The operator's program, run with /bin/sh -c as the worker: exit 0 within timeout_ms is
  // healthy; anything else fails with its first lines of output as the reason. Empty: none.
  std::string program;
  int64_t program_timeout_ms = 30000;
  // The tiny kernel on each GPU ("gpu:kernel"): a command run as `program` is (with its
  // timeout), set by the daemon only on a worker with GPUs: convoy-trainer --check-devices
  // with the worker's GPU indices (trainer/device_check.h). Empty: none.
  std::string device_program;
  int64_t interval_ms = 30000;
};

// At least `min_free` bytes free for an unprivileged writer at `path` (statvfs's f_bavail).
HealthCheckOutcome CheckFreeSpace(const std::string& name, const std::string& path,
                                  int64_t min_free);
// `dir` has `min_free` bytes free and a file can be made and removed there.
HealthCheckOutcome CheckShm(const std::string& dir, int64_t min_free);
// Runs `program` with /bin/sh -c in a process group of its own, killed with the group after
// `timeout_ms`; its first output lines (stdout and stderr) are the detail.
// `running`, when given, holds its process group while it runs (0 otherwise), so that an
// owner that stops can kill it instead of waiting for it.
HealthCheckOutcome RunHealthProgram(const std::string& program, int64_t timeout_ms,
                                    std::atomic<pid_t>* running = nullptr);
// Every device's volatile uncorrected ECC errors and pending page retirements (devices
// without ECC pass). No GPU, or no NVML: nothing to check, no outcome.
std::vector<HealthCheckOutcome> CheckGpus(const Nvml* nvml);

// Every check of `options` once; the report's state is kOk or kFailing.
HealthReport RunHealthChecks(const HealthOptions& options, const Nvml* nvml, const Clock& clock,
                             std::atomic<pid_t>* running = nullptr);

// "state: reason" in words for logs.
std::string DescribeHealth(const HealthReport& report);

// Runs the checks at once and then every interval on a thread of its own. `on_change` runs on
// that thread after a check whose state or reason differs from the previous one's (the
// daemon logs it and wakes the supervisor to report it at once).
class HealthMonitor {
 public:
  HealthMonitor(HealthOptions options, const Nvml* nvml, const Clock& clock,
                std::function<void(const HealthReport&)> on_change);
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // The newest report (kChecking until the first check ends).
  HealthReport Latest() const EXCLUDES(mu_);
  // Runs a check now instead of at the next interval (tests, and after a failed launch).
  void CheckNow() EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);

  const HealthOptions options_;
  const Nvml* const nvml_;
  const Clock& clock_;
  const std::function<void(const HealthReport&)> on_change_;
  mutable Mutex mu_;
  CondVar cv_;
  HealthReport latest_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  bool check_now_ GUARDED_BY(mu_) = false;
  std::atomic<pid_t> running_{0};  // the program's process group while it runs
  std::thread thread_;
};

}  // namespace convoy

// convoy-coordinator: parses its flags, runs an admin command or builds the daemon
// (CoordinatorServer, the one composition root), and owns what is the process's: signals,
// the open-file limit, systemd's readiness and watchdog.
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "common/config_file.h"
#include "common/fd_limit.h"
#include "common/signals.h"
#include "common/util.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/server/admin_commands.h"
#include "coordinator/server/check_config.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/server/flags.h"
#include "coordinator/server/systemd_notify.h"

int main(int argc, char** argv) {
  using namespace convoy;
  // Private by default: the state database, the CA's key, code archives and tokens are
  // nobody else's business (issue 18). Files 0600, directories 0700 unless said otherwise.
  umask(077);
  // Logs go to stderr (stdout is for what the admin commands print: tokens, fingerprints).
  spdlog::set_default_logger(spdlog::stderr_color_mt("convoy-coordinator"));
  CoordinatorFlags flags;
  int exit_code = 0;
  ConfigCheck check;
  Status parsed = ParseCoordinatorFlags(argc, argv, &flags, &exit_code, &check);
  if (!parsed.ok()) {
    if (!parsed.message().empty()) spdlog::error("{}", parsed.message());
    return exit_code;
  }
  if (check.enabled) {
    // deploy/README.md: "configuration OK" and 0, or a "configuration error:" line for each
    // problem and 1.
    std::vector<std::string> notes;
    if (!check.incomplete) CheckCoordinatorConfig(flags, &notes, &check.errors);
    return ReportConfigCheck(check.errors, notes);
  }
  if (flags.command != "serve") return RunAdminCommand(flags);
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ coordinator: %v");
  if (flags.insecure) {
    spdlog::warn("--insecure: gRPC is plain text and unauthenticated; use only on a trusted host");
  }

  // Blocked in every thread; main waits for them below.
  sigset_t signals = BlockShutdownSignals();

  // Debian's abseil checks every absl::Mutex acquisition for lock-order cycles (a graph of
  // every mutex gRPC ever made): with thousands of connections that was the largest single
  // cost in the coordinator's profile. Convoy's own locks are checked by clang's analysis.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Every worker holds a connection: thousands of descriptors.
  const FileLimit files = RaiseFileLimit();
  if (files.ok) {
    spdlog::info("open-file limit: soft {} (was {}), hard {}", files.soft, files.before,
                 files.hard);
  } else {
    spdlog::warn("open-file limit: could not raise the soft limit {} to the hard limit {}",
                 files.before, files.hard);
  }

  // With an etcd store a follower waits in Create until it leads; SIGTERM or SIGINT (blocked,
  // so pending) ends that wait.
  const auto stop_requested = [] {
    sigset_t pending;
    sigpending(&pending);
    return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
  };
  CoordinatorServer::Deps deps;
  deps.stop_requested = stop_requested;
  std::string waiting_for;
  deps.waiting = [&waiting_for](const std::string& status) {
    if (status != waiting_for) NotifyReady(status);
    waiting_for = status;
    NotifyWatchdog();
  };
  auto server = CoordinatorServer::Create(flags, std::move(deps));
  if (!server.ok() && stop_requested()) {
    spdlog::info("stopped before leading ({})", server.status().message());
    return 0;
  }
  if (!server.ok()) {
    spdlog::error("{}", server.status().message());
    return server.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  Coordinator& coordinator = (*server)->coordinator();
  std::mutex watchdog_mu;
  std::condition_variable watchdog_cv;
  bool stopping = false;

  // systemd (Type=notify): ready once the port serves; the watchdog is fed only while the
  // ticker keeps completing ticks (each takes the state lock), so that a wedged coordinator
  // is restarted by systemd instead of hanging every worker.
  NotifyReady("serving on " + flags.listen);
  std::thread watchdog;
  if (const uint64_t interval_us = WatchdogIntervalUs(); interval_us > 0) {
    spdlog::info("systemd watchdog every {} ms", interval_us / 1000);
    watchdog = std::thread([&, interval_us] {
      uint64_t last = coordinator.ticks();
      std::unique_lock<std::mutex> lock(watchdog_mu);
      while (!stopping) {
        watchdog_cv.wait_for(lock, std::chrono::microseconds(interval_us / 3));
        const uint64_t now = coordinator.ticks();
        if (now != last) {
          NotifyWatchdog();
        } else {
          spdlog::warn("the ticker made no progress in {} ms: not feeding the watchdog",
                       interval_us / 3000);
        }
        last = now;
      }
    });
  }

  int sig = 0;
  sigwait(&signals, &sig);
  {
    std::lock_guard<std::mutex> lock(watchdog_mu);
    stopping = true;
  }
  watchdog_cv.notify_all();
  if (watchdog.joinable()) watchdog.join();
  NotifyStopping();
  spdlog::info("received signal {}; shutting down (training keeps running on the workers)", sig);
  (*server)->Shutdown();
  return 0;
}

// convoy-worker: discovers this machine's resources, connects to the coordinator, and runs
// the ranks it is given. Decisions about processes live in Supervisor, the stream in
// CoordinatorConnection, their wiring in WorkerDaemon (the one composition root); main parses
// the flags, creates the daemon and waits for SIGTERM/SIGINT.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config_file.h"
#include "common/fd_limit.h"
#include "common/signals.h"
#include "worker/daemon/check_config.h"
#include "worker/daemon/flags.h"
#include "worker/daemon/worker_daemon.h"

int main(int argc, char** argv) {
  using namespace convoy;
  // Private by default (issue 18): the worker's files are 0600 and its directories 0700;
  // the few a rank must reach are made searchable (not listable) where they are created.
  // Ranks inherit it, so a job's own files (checkpoints, outputs) are private too.
  umask(077);
  // Descriptors 0-2 must exist, or a pipe created for a rank could take their numbers.
  for (int fd = 0; fd < 3; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) open("/dev/null", O_RDWR);
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("convoy-worker"));
  WorkerFlags flags;
  int exit_code = 0;
  ConfigCheck check;
  const Status parsed = ParseWorkerFlags(argc, argv, &flags, &exit_code, &check);
  if (!parsed.ok()) {
    if (!parsed.message().empty()) spdlog::error("{}", parsed.message());
    return exit_code;
  }
  if (check.enabled) {
    // deploy/README.md: "configuration OK" and 0, or a "configuration error:" line for each
    // problem and 1.
    std::vector<std::string> notes;
    if (!check.incomplete) CheckWorkerConfig(flags, &notes, &check.errors);
    return ReportConfigCheck(check.errors, notes);
  }
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ worker " + flags.name + ": %v");
  if (flags.insecure) {
    spdlog::warn(
        "--insecure: the connection to the coordinator is PLAIN TEXT and UNAUTHENTICATED; "
        "use only with a coordinator on this host.");
  }

  // Blocked in every thread (they are started below); main waits for them.
  sigset_t signals = BlockShutdownSignals();

  // Every rank holds pipes, a log file and a metrics socket.
  const FileLimit files = RaiseFileLimit();
  spdlog::info("open-file limit: soft {} (was {}), hard {}", files.soft, files.before, files.hard);

  auto daemon = WorkerDaemon::Create(flags);
  if (!daemon.ok()) {
    spdlog::error("{}", daemon.status().message());
    return daemon.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  (*daemon)->Start();

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}: stopping every rank, then exiting",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*daemon)->Stop();
  daemon->reset();
  spdlog::info("stopped");
  return 0;
}

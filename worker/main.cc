// convoy-worker: discovers this machine's resources, connects to the coordinator, and runs
// the ranks it is given. Decisions about processes live in Supervisor.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "common/signals.h"
#include "worker/connection.h"
#include "worker/flags.h"
#include "worker/supervisor.h"

namespace {

std::string FirstNonLoopbackIpv4() {
  ifaddrs* list = nullptr;
  std::string found;
  if (getifaddrs(&list) != 0) return "127.0.0.1";
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) != 0 || (i->ifa_flags & IFF_UP) == 0) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) != nullptr) found = buf;
  }
  freeifaddrs(list);
  return found.empty() ? "127.0.0.1" : found;
}

std::vector<int> VisibleGpus() {
  std::vector<int> gpus;
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES"); cvd != nullptr) {
    std::string s = cvd;
    size_t start = 0;
    while (start < s.size()) {
      size_t end = s.find(',', start);
      if (end == std::string::npos) end = s.size();
      try {
        gpus.push_back(std::stoi(s.substr(start, end - start)));
      } catch (...) {
      }
      start = end + 1;
    }
    return gpus;
  }
  for (int i = 0; i < 64; ++i) {
    if (std::filesystem::exists("/dev/nvidia" + std::to_string(i))) gpus.push_back(i);
  }
  return gpus;
}

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path().string();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace convoy;
  WorkerFlags flags;
  int exit_code = 0;
  Status parsed = ParseWorkerFlags(argc, argv, &flags, &exit_code);
  if (!parsed.ok()) {
    if (exit_code == 2) spdlog::error("{}", parsed.message());
    return exit_code;
  }
  if (exit_code != 0) return exit_code;
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ worker " + flags.name + ": %v");
  spdlog::warn("--insecure: gRPC is plain text and unauthenticated; use only on a trusted host");

  // Blocked in every thread; main waits for them below.
  sigset_t signals = BlockShutdownSignals();

  WorkerConfig config;
  config.name = flags.name;
  config.address =
      flags.advertise_address.empty() ? FirstNonLoopbackIpv4() : flags.advertise_address;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  config.hostname = host;
  std::error_code ec;
  std::filesystem::create_directories(flags.work_dir, ec);
  if (ec) {
    spdlog::error("--work-dir {}: {}", flags.work_dir, ec.message());
    return 1;
  }
  config.work_dir = std::filesystem::absolute(flags.work_dir).string();
  config.trainer_path = flags.trainer.empty() ? SelfDir() + "/convoy-trainer" : flags.trainer;
  config.cores = flags.cores > 0
                     ? flags.cores
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  config.gpus = VisibleGpus();
  config.slots = flags.slots > 0
                     ? flags.slots
                     : (config.gpus.empty() ? config.cores : static_cast<int>(config.gpus.size()));
  config.kill_grace_ms = flags.kill_grace_ms;
  config.orphan_timeout_ms = static_cast<int64_t>(flags.orphan_timeout_s * 1000);
  config.log_max_bytes = flags.log_max_bytes;

  CoordinatorConnection connection(flags.coordinator);
  PosixProcessLauncher launcher;
  Supervisor supervisor(config, launcher, connection);
  connection.SetSupervisor(&supervisor);
  supervisor.Start();
  spdlog::info("convoy-worker {} '{}' at {}: {} cores, {} GPUs, {} slots; coordinator {}",
               CONVOY_VERSION, config.name, config.address, config.cores, config.gpus.size(),
               config.slots, flags.coordinator);
  std::thread conn([&] { connection.Run(); });

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received signal {}: stopping every rank, then exiting", sig);
  supervisor.Stop();  // reports the exits while the stream is still up
  connection.Shutdown();
  conn.join();
  return 0;
}

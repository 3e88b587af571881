#include "worker/resources.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace convoy {

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

std::vector<int> VisibleGpus(const std::optional<std::string>& cuda_visible_devices,
                             const std::string& dev_dir) {
  std::vector<int> gpus;
  if (cuda_visible_devices.has_value()) {
    const std::string& s = *cuda_visible_devices;
    size_t start = 0;
    int position = 0;
    while (start < s.size()) {
      size_t end = s.find(',', start);
      if (end == std::string::npos) end = s.size();
      std::string item = s.substr(start, end - start);
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (item.rfind("GPU-", 0) == 0 || item.rfind("MIG-", 0) == 0) {
        gpus.push_back(position);  // a UUID: the process sees it as this index
      } else {
        if (item.empty() || item.size() > 4 ||
            !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          break;  // CUDA ignores this entry and every one after it ("-1" hides all)
        }
        gpus.push_back(std::stoi(item));
      }
      ++position;
      start = end + 1;
    }
    return gpus;
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dev_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= 6 || name.rfind("nvidia", 0) != 0 || name.size() > 10) continue;
    const std::string digits = name.substr(6);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    gpus.push_back(std::stoi(digits));
  }
  std::sort(gpus.begin(), gpus.end());
  return gpus;
}

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

std::string HostName() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

std::string SelfDirectory() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path().string();
}

}  // namespace convoy

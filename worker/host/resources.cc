#include "worker/host/resources.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "common/util.h"
#include "spec/job_spec_validation.h"

namespace convoy {
namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") + 1 - b);
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The first line of `path`, trimmed; empty when it cannot be read.
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return Trim(line);
}

std::string JoinIndices(const std::vector<GpuDeviceInfo>& devices) {
  std::string out;
  for (const auto& d : devices) out += (out.empty() ? "" : ", ") + std::to_string(d.index);
  return out.empty() ? "none" : out;
}

}  // namespace

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
                             const std::string& dev_dir, const std::vector<GpuDeviceInfo>& known) {
  std::vector<int> gpus;
  if (cuda_visible_devices.has_value()) {
    const std::string& s = *cuda_visible_devices;
    size_t start = 0;
    int position = 0;
    while (start < s.size()) {
      size_t end = s.find(',', start);
      if (end == std::string::npos) end = s.size();
      const std::string item = Trim(s.substr(start, end - start));
      if (item.rfind("GPU-", 0) == 0 || item.rfind("MIG-", 0) == 0) {
        // A UUID (CUDA takes a unique prefix too): the device that has it, when known, else
        // the index the process sees it as.
        int index = position;
        for (const GpuDeviceInfo& d : known) {
          if (!d.uuid.empty() && d.uuid.rfind(item, 0) == 0) index = d.index;
        }
        gpus.push_back(index);
      } else {
        if (item.size() > 4 || !AllDigits(item)) {
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
    if (!AllDigits(digits)) continue;
    gpus.push_back(std::stoi(digits));
  }
  std::sort(gpus.begin(), gpus.end());
  return gpus;
}

int64_t UsableMemoryBytes(const std::string& proc_root, const std::string& cgroup_root) {
  int64_t total = 0;
  std::ifstream meminfo(proc_root + "/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(9));
    int64_t kb = 0;
    std::string unit;
    if (fields >> kb >> unit && unit == "kB" && kb > 0) total = kb * 1024;
    break;
  }
  // cgroup v2: "0::/system.slice/convoy-worker.service". Every memory.max on the way up
  // limits it (a container's, a systemd unit's MemoryMax=).
  std::ifstream cgroups(proc_root + "/self/cgroup");
  std::string path;
  while (std::getline(cgroups, line)) {
    if (line.rfind("0::", 0) == 0) path = Trim(line.substr(3));
  }
  if (path.empty() || path[0] != '/' || path.find("..") != std::string::npos) return total;
  for (std::filesystem::path dir = path;; dir = dir.parent_path()) {
    const std::string max = FirstLine(cgroup_root + dir.string() + "/memory.max");
    int64_t limit = 0;
    auto [ptr, ec] = std::from_chars(max.data(), max.data() + max.size(), limit);
    if (ec == std::errc() && ptr == max.data() + max.size() && limit > 0 &&
        (total == 0 || limit < total)) {
      total = limit;
    }
    if (dir == dir.parent_path()) break;
  }
  return total;
}

StatusOr<int64_t> ParseByteSize(const std::string& text, const std::string& flag) {
  bool overflow = false;
  const std::optional<int64_t> bytes = ParseByteQuantity(text, &overflow);
  if (overflow) return Status::InvalidArgument(flag + " " + text + ": out of range");
  if (!bytes || *bytes == 0) {
    return Status::InvalidArgument(flag + ": expected a size such as 64Gi, 512Mi, 2G or a number " +
                                   "of bytes, got '" + text + "'");
  }
  return *bytes;
}

std::vector<GpuDeviceInfo> GpusFromProcDriver(const std::string& root) {
  // Directory names are PCI bus ids ("0000:19:00.0", fixed width): sorted, they are in bus
  // order. (The "Device Minor:" line is the /dev/nvidia<N> number, not CUDA's index: in a
  // container given the host's GPUs 2 and 3, CUDA and NVML call them 0 and 1.)
  std::vector<std::string> buses;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root + "/gpus", ec)) {
    buses.push_back(entry.path().filename().string());
  }
  std::sort(buses.begin(), buses.end());
  std::vector<GpuDeviceInfo> out;
  for (const std::string& bus : buses) {
    std::ifstream info(root + "/gpus/" + bus + "/information");
    if (!info) continue;
    GpuDeviceInfo d;
    d.index = static_cast<int>(out.size());
    std::string line;
    while (std::getline(info, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = Trim(line.substr(0, colon));
      const std::string value = Trim(line.substr(colon + 1));
      if (key == "Model") d.model = value;
      if (key == "GPU UUID") d.uuid = value;
    }
    out.push_back(std::move(d));
  }
  return out;
}

StatusOr<std::vector<int>> ParseGpuList(const std::string& text) {
  std::vector<int> out;
  if (text == "none") return out;
  std::set<int> seen;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = Trim(text.substr(start, end - start));
    if (item.size() > 4 || !AllDigits(item)) {
      return Status::InvalidArgument("--gpus: expected GPU indices such as 0,1 or 'none', got '" +
                                     text + "'");
    }
    const int index = std::stoi(item);
    if (!seen.insert(index).second) {
      return Status::InvalidArgument("--gpus " + text + ": GPU " + item + " is named twice");
    }
    out.push_back(index);
    start = end + 1;
  }
  return out;
}

StatusOr<OfferedGpus> DiscoverGpus(const GpuSources& src) {
  // What the machine has.
  std::vector<GpuDeviceInfo> known;
  std::string from;
  if (src.nvml && !src.nvml->empty()) {
    known = *src.nvml;
    from = "NVML";
  } else if (auto proc = GpusFromProcDriver(src.proc_driver_root); !proc.empty()) {
    known = std::move(proc);
    from = src.proc_driver_root;
  } else {
    for (int i : VisibleGpus(std::nullopt, src.dev_dir)) known.push_back({i, "", 0, ""});
    if (!known.empty()) from = src.dev_dir + "/nvidia*";
  }
  // Which of them are offered.
  std::vector<int> chosen;
  OfferedGpus out;
  if (src.gpus_flag) {
    auto given = ParseGpuList(*src.gpus_flag);
    if (!given.ok()) return given.status();
    chosen = *given;
    for (int i : chosen) {
      const bool found = std::any_of(known.begin(), known.end(),
                                     [i](const GpuDeviceInfo& d) { return d.index == i; });
      if (!known.empty() && !found) {
        return Status::InvalidArgument("--gpus " + *src.gpus_flag + ": this machine has no GPU " +
                                       std::to_string(i) + " (" + from + " found " +
                                       JoinIndices(known) + ")");
      }
    }
    out.source = "--gpus " + *src.gpus_flag + (from.empty() ? "" : " (" + from + ")");
  } else if (src.cuda_visible_devices) {
    chosen = VisibleGpus(src.cuda_visible_devices, src.dev_dir, known);
    out.source = "CUDA_VISIBLE_DEVICES=" + *src.cuda_visible_devices +
                 (from.empty() ? "" : " (" + from + ")");
  } else {
    for (const auto& d : known) chosen.push_back(d.index);
    out.source = from.empty() ? "none found" : from;
  }
  for (int i : chosen) {
    GpuDeviceInfo d{i, "", 0, ""};
    for (const auto& k : known) {
      if (k.index == i) d = k;
    }
    out.devices.push_back(std::move(d));
  }
  return out;
}

StatusOr<std::map<std::string, std::string>> ParseLabels(const std::vector<std::string>& labels) {
  std::map<std::string, std::string> out;
  for (const std::string& label : labels) {
    const size_t eq = label.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument("--label '" + label + "': expected KEY=VALUE, e.g. zone=a");
    }
    const std::string key = label.substr(0, eq);
    const std::string value = label.substr(eq + 1);
    if (!IsValidLabelKey(key)) {
      return Status::InvalidArgument(
          "--label '" + label +
          "': the key must be 1-253 characters of [A-Za-z0-9._/-] starting with a letter or "
          "digit");
    }
    if (!IsValidLabelValue(value)) {
      return Status::InvalidArgument("--label '" + label +
                                     "': the value must be at most 63 characters of "
                                     "[A-Za-z0-9._-]");
    }
    if (!out.emplace(key, value).second) {
      return Status::InvalidArgument("--label '" + label + "': " + key + " is given twice");
    }
  }
  return out;
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

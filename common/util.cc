#include "common/util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/random.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>

namespace convoy {

StatusOr<std::pair<std::string, int>> ParseHostPort(const std::string& text,
                                                    const std::string& flag) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return Status::InvalidArgument(flag + ": expected HOST:PORT, got '" + text + "'");
  }
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port_text = text.substr(colon + 1);
  int port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9' || port > 65535) {
      return Status::InvalidArgument(flag + ": port '" + port_text + "' is not a number");
    }
    port = port * 10 + (c - '0');
  }
  if (port > 65535) {
    return Status::InvalidArgument(flag + ": port " + port_text + " is out of range");
  }
  return std::make_pair(host, port);
}

std::optional<int64_t> ParseByteQuantity(const std::string& text, bool* overflow) {
  *overflow = false;
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  static const std::map<std::string, int64_t> kUnits = {{"", 1},
                                                        {"K", 1000},
                                                        {"M", 1000 * 1000},
                                                        {"G", 1000 * 1000 * 1000},
                                                        {"T", int64_t{1000} * 1000 * 1000 * 1000},
                                                        {"Ki", int64_t{1} << 10},
                                                        {"Mi", int64_t{1} << 20},
                                                        {"Gi", int64_t{1} << 30},
                                                        {"Ti", int64_t{1} << 40}};
  auto it = kUnits.find(text.substr(digits));
  if (digits == 0 || it == kUnits.end()) return std::nullopt;
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, value);
  (void)ptr;
  if (ec != std::errc() || value > std::numeric_limits<int64_t>::max() / it->second) {
    *overflow = true;
    return std::nullopt;
  }
  return value * it->second;
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return false;
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return "signal " + std::to_string(signal);
  return std::string("SIG") + abbrev;
}

bool IsValidName(const std::string& name) {
  if (name.empty() || name.size() > 63 || name[0] == '.' || name[0] == '-') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string RandomHexId() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::abort();  // no randomness at all: nothing safe to hand out
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

bool IsHexId(const std::string& id) {
  if (id.size() != 32) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string UtcIso8601(int64_t unix_s) {
  const time_t t = static_cast<time_t>(unix_s);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string HumanBytes(int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0 || std::fabs(v - std::round(v)) < 0.05) {
    snprintf(buf, sizeof(buf), "%.0f %s", v, kUnits[u]);
  } else {
    snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[u]);
  }
  return buf;
}

StatusOr<std::vector<std::pair<std::string, int>>> ParseHostPortList(const std::string& text,
                                                                     const std::string& flag) {
  std::vector<std::pair<std::string, int>> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    auto hp = ParseHostPort(text.substr(start, end - start), flag);
    if (!hp.ok()) return hp.status();
    out.push_back(std::move(*hp));
    start = end + 1;
  }
  return out;
}

StatusOr<std::string> CheckCoordinators(const std::string& coordinators, const std::string& flag) {
  auto parts = ParseHostPortList(coordinators, flag);
  if (!parts.ok()) return parts.status();
  std::string chosen;
  for (const auto& [host, port] : *parts) {
    if (chosen.empty() || (IsLoopbackHost(chosen) && !IsLoopbackHost(host))) chosen = host;
  }
  return chosen;
}

}  // namespace convoy

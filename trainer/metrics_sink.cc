#include "trainer/metrics_sink.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "common/rank_contract.h"

namespace convoy::trainer {

MetricsSink::MetricsSink(const std::string& path) {
  if (path.empty()) return;
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::cerr << "warning: metrics socket " << path << ": " << std::strerror(errno)
              << "; metric records are dropped" << std::endl;
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
}

MetricsSink::~MetricsSink() {
  if (fd_ >= 0) close(fd_);
}

namespace {

// `text` as a JSON string's content.
std::string JsonEscaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\u%04x",
                    static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

void MetricsSink::Write(const std::string& kind,
                        const std::vector<std::pair<std::string, double>>& fields,
                        const std::vector<std::pair<std::string, std::string>>& texts) {
  if (fd_ < 0) return;
  std::string line = std::string("{\"") + rank_contract::metric::kKind + "\":\"" + kind + "\"";
  char buf[64];
  for (const auto& [k, v] : fields) {
    if (!std::isfinite(v)) continue;
    if (v == std::floor(v) && std::fabs(v) < 1e15) {
      std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
    } else {
      std::snprintf(buf, sizeof(buf), "%.9g", v);
    }
    line += ",\"" + k + "\":" + buf;
  }
  for (const auto& [k, v] : texts) line += ",\"" + k + "\":\"" + JsonEscaped(v) + "\"";
  line += "}\n";
  ssize_t n = send(fd_, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
    close(fd_);
    fd_ = -1;
  }
}

}  // namespace convoy::trainer

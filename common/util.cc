#include "common/util.h"

#include <arpa/inet.h>

#include <csignal>
#include <cstring>

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

}  // namespace convoy

#include "worker/exec/port_reservations.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <utility>

namespace convoy {

PortReservations::PortReservations(std::string address, const Clock& clock)
    : address_(std::move(address)), clock_(clock) {}

PortReservations::~PortReservations() { ReleaseAll(); }

StatusOr<int> PortReservations::Reserve(const AttemptKey& key) {
  auto held = held_.find(key);
  if (held != held_.end()) return held->second.port;
  std::string error;
  for (bool any : {false, true}) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    if (any) {
      addr.sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (inet_pton(AF_INET, address_.c_str(), &addr.sin_addr) != 1) {
      continue;
    }
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = std::string("socket: ") + std::strerror(errno);
      break;
    }
    socklen_t len = sizeof(addr);
    const int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
        bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      const int port = ntohs(addr.sin_port);
      held_[key] = {fd, port, clock_.NowMonotonicMs()};
      return port;
    }
    error = std::string("bind ") + (any ? "0.0.0.0" : address_) + ": " + std::strerror(errno);
    close(fd);
  }
  return Status::Unavailable(error.empty() ? "no free port" : error);
}

void PortReservations::Release(const AttemptKey& key) {
  auto held = held_.find(key);
  if (held == held_.end()) return;
  close(held->second.fd);
  held_.erase(held);
}

void PortReservations::ReleaseUnused(const UseOf& use) {
  const int64_t now = clock_.NowMonotonicMs();
  for (auto it = held_.begin(); it != held_.end();) {
    const Use u = use(it->first);
    if (u == Use::kEnded || (u == Use::kNotHere && now - it->second.reserved_ms > kHoldMs)) {
      close(it->second.fd);
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
}

void PortReservations::ReleaseAll() {
  for (auto& [key, held] : held_) close(held.fd);
  held_.clear();
}

int64_t PortReservations::NextExpiryMs(const UseOf& use) const {
  int64_t due = std::numeric_limits<int64_t>::max();
  for (const auto& [key, held] : held_) {
    if (use(key) == Use::kNotHere) due = std::min(due, held.reserved_ms + kHoldMs + 1);
  }
  return due;
}

}  // namespace convoy

#include "coordinator/rpc/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace convoy {
namespace {

// Room for connections arriving in a burst (10,000 workers after a coordinator restart).
constexpr int kBacklog = 4096;

int CountOpenFiles() {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

}  // namespace

StatusOr<std::unique_ptr<Listener>> Listener::Bind(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return Status::InvalidArgument("--listen " + address + ": expected HOST:PORT");
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return Status::InvalidArgument("--listen " + address + ": " + gai_strerror(rc));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, kBacklog) != 0) {
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return Status::Unavailable("--listen " + address + ": cannot listen: " + error);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return Status::Unavailable(std::string("eventfd: ") + std::strerror(errno));
  }
  return std::unique_ptr<Listener>(new Listener(fd, bound_port, wake));
}

Listener::~Listener() {
  Stop();
  close(fd_);
  close(wake_fd_);
  if (spare_fd_ >= 0) close(spare_fd_);
}

void Listener::Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor) {
  acceptor_ = std::move(acceptor);
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  thread_ = std::thread([this] { Loop(); });
}

void Listener::Stop() {
  if (stopped_) return;
  stopped_ = true;
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    spdlog::warn("listener: cannot wake the accept loop: {}", std::strerror(errno));
  }
  if (thread_.joinable()) thread_.join();
}

void Listener::Loop() {
  bool exhausted = false;
  uint64_t shed_in_episode = 0;
  for (;;) {
    // While out of descriptors, try again every 100 ms (the waiting connection keeps the
    // listening socket readable, so polling it would spin).
    pollfd fds[2] = {{exhausted ? -1 : fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, exhausted ? 100 : -1) < 0 && errno != EINTR) {
      spdlog::error("listener: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    for (;;) {
      const int conn = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (conn >= 0) {
        if (exhausted) {
          exhausted = false;
          spdlog::info("listener: accepting connections again ({} shed while out of descriptors)",
                       shed_in_episode);
          if (spare_fd_ < 0) spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        const int one = 1;
        setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
        p.listener_fd = fd_;
        p.fd = conn;
        acceptor_->HandleNewConnection(&p);
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EMFILE || errno == ENFILE) {
        // Release the spare, take the waiting connection and close it: the client sees the
        // connection refused and backs off, instead of waiting in the backlog.
        const bool first = !exhausted;
        exhausted = true;
        if (first) shed_in_episode = 0;
        if (first && spare_fd_ < 0) {
          spdlog::error(
              "listener: out of file descriptors; shedding new connections, serving the open "
              "ones");
        }
        if (spare_fd_ >= 0) {
          close(spare_fd_);
          spare_fd_ = -1;
          if (first) {  // counted with the spare's descriptor free: listing needs one
            spdlog::error(
                "listener: out of file descriptors ({} open); shedding new connections, "
                "serving the open ones",
                CountOpenFiles());
          }
          const int victim = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (victim >= 0) {
            close(victim);
            ++shed_;
            ++shed_in_episode;
          }
          spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        break;
      }
      spdlog::error("listener: accept: {}", std::strerror(errno));
      break;
    }
  }
}

}  // namespace convoy

#include "worker/exec/metrics_server.h"

#include <errno.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace convoy {
namespace {

constexpr size_t kMaxConnections = 1024;
// Read at most this much from one connection per wake-up, so that one chatty rank cannot
// starve the supervisor's other work.
constexpr size_t kMaxReadPerWake = 1 << 20;
constexpr int64_t kWarningIntervalMs = 10000;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string MetricsSocketPath(const std::string& work_dir, const std::string& fallback_dir,
                              const std::string& job_id, int attempt) {
  const std::string path = work_dir + "/run/" + job_id + "." + std::to_string(attempt) + ".sock";
  if (path.size() < sizeof(sockaddr_un::sun_path)) return path;
  if (fallback_dir.empty()) return "";
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016zx", std::hash<std::string>()(path));
  return fallback_dir + "/" + hash + ".sock";
}

StatusOr<std::string> MakeSocketFallbackDir(bool searchable) {
  char tmpl[] = "/tmp/convoy-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return Status::Internal(std::string("mkdtemp /tmp/convoy-XXXXXX: ") + strerror(errno));
  }
  if (searchable) chmod(tmpl, 0711);
  return std::string(tmpl);
}

StatusOr<std::unique_ptr<MetricsSocket>> MetricsSocket::Open(const std::string& path,
                                                             std::string label, uid_t ranks_uid,
                                                             gid_t ranks_gid) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    return Status::InvalidArgument("metrics socket path '" + path + "' is too long");
  }
  unlink(path.c_str());  // a stale socket of a worker that died
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // Bound under the daemon's umask 077 (nobody else can connect meanwhile), then given to
  // the ranks' user, who needs write permission to connect: the mode first, while it is
  // still ours (a worker without CAP_FOWNER cannot change it once given away).
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      chmod(path.c_str(), 0600) != 0 ||
      (ranks_uid != geteuid() && lchown(path.c_str(), ranks_uid, ranks_gid) != 0) ||
      listen(fd, 128) != 0) {
    const std::string why = strerror(errno);
    close(fd);
    unlink(path.c_str());
    return Status::Internal(path + ": " + why);
  }
  return std::unique_ptr<MetricsSocket>(new MetricsSocket(fd, path, std::move(label), ranks_uid));
}

MetricsSocket::MetricsSocket(int listen_fd, std::string path, std::string label, uid_t ranks_uid)
    : listen_fd_(listen_fd),
      path_(std::move(path)),
      label_(std::move(label)),
      ranks_uid_(ranks_uid) {}

MetricsSocket::~MetricsSocket() {
  for (auto& c : conns_) close(c->fd);
  close(listen_fd_);
  unlink(path_.c_str());
  if (suppressed_ > 0) {
    spdlog::warn("{}: {} more malformed metric lines were dropped", label_, suppressed_);
  }
}

std::vector<int> MetricsSocket::PollFds() const {
  std::vector<int> fds{listen_fd_};
  for (const auto& c : conns_) fds.push_back(c->fd);
  return fds;
}

void MetricsSocket::OnReadable(int fd, const RankOf& rank_of, int64_t now_unix_ms,
                               std::vector<v1::MetricRecord>* out) {
  if (fd == listen_fd_) {
    Accept(rank_of);
    return;
  }
  for (size_t i = 0; i < conns_.size(); ++i) {
    if (conns_[i]->fd != fd) continue;
    Read(*conns_[i], now_unix_ms, out);
    if (conns_[i]->fd < 0) conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

void MetricsSocket::Drain(const RankOf& rank_of, int64_t now_unix_ms,
                          std::vector<v1::MetricRecord>* out) {
  Accept(rank_of);  // a rank that connected just before it ended
  for (auto& c : conns_) {
    // Read stops at kMaxReadPerWake; a few rounds take whatever a rank left behind.
    for (int i = 0; i < 16 && c->fd >= 0; ++i) Read(*c, now_unix_ms, out);
  }
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(),
                              [](const std::unique_ptr<Conn>& c) { return c->fd < 0; }),
               conns_.end());
}

void MetricsSocket::Accept(const RankOf& rank_of) {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (conns_.size() >= kMaxConnections) {
      Dropped("too many connections to the metrics socket");
      close(fd);
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) {
      Dropped("a connection whose peer cannot be identified (SO_PEERCRED)");
      close(fd);
      continue;
    }
    if (cred.uid != ranks_uid_) {
      Dropped("a connection from uid " + std::to_string(cred.uid) + " (pid " +
              std::to_string(cred.pid) + "), not the ranks' uid " + std::to_string(ranks_uid_));
      close(fd);
      continue;
    }
    // A rank or a process of its group (a data loader it forked). A process that has left
    // the group, or has ended already, cannot be told from a stranger.
    const int rank = rank_of(cred.pid, getpgid(cred.pid));
    if (rank < 0) {
      Dropped("a connection from pid " + std::to_string(cred.pid) +
              ", which is no rank of this attempt");
      close(fd);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->rank = rank;
    conns_.push_back(std::move(c));
  }
}

void MetricsSocket::Read(Conn& c, int64_t now_unix_ms, std::vector<v1::MetricRecord>* out) {
  char buf[65536];
  bool closed = false;
  size_t total = 0;
  while (total < kMaxReadPerWake) {
    const ssize_t n = read(c.fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {
      closed = true;
      break;
    }
    total += static_cast<size_t>(n);
    const int64_t long_before = c.lines.dropped_long();
    for (const std::string& line : c.lines.Feed(buf, static_cast<size_t>(n))) {
      if (line.empty()) continue;
      bool has_rank = false;
      auto rec = ParseMetricLine(line, &has_rank);
      if (!rec.ok()) {
        Dropped(rec.status().message());
        continue;
      }
      if (has_rank && rec->rank() != c.rank) {
        Dropped("a record of rank " + std::to_string(c.rank) + " that claims rank " +
                std::to_string(rec->rank()));
        continue;
      }
      rec->set_rank(c.rank);
      rec->set_time_unix_ms(now_unix_ms);
      out->push_back(std::move(*rec));
    }
    if (c.lines.dropped_long() != long_before) {
      Dropped("a metric line longer than " + std::to_string(kMaxMetricLineBytes) + " bytes");
    }
  }
  if (closed) {
    if (c.lines.Finish()) Dropped("a truncated last metric line");
    close(c.fd);
    c.fd = -1;
  }
}

void MetricsSocket::Dropped(const std::string& why) {
  ++dropped_;
  const int64_t now = SteadyMs();
  if (last_warning_ms_ != 0 && now - last_warning_ms_ < kWarningIntervalMs) {
    ++suppressed_;
    return;
  }
  spdlog::warn("{}: dropped {}{}", label_, why,
               suppressed_ > 0 ? " (and " + std::to_string(suppressed_) + " more before)" : "");
  last_warning_ms_ = now;
  suppressed_ = 0;
}

}  // namespace convoy

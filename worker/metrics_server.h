// One attempt's metrics socket: a Unix stream socket at CONVOY_METRICS_SOCKET to which the
// attempt's ranks connect and write newline-delimited JSON records. Each connection's rank
// is identified from SO_PEERCRED (the peer's pid or its process group is a rank's); where it
// cannot be, a record's "rank" field is used. Bad input (garbage, non-objects, lines over
// 64 KiB, a truncated last line) is dropped with a rate-limited warning.
//
// Threading: not thread-safe; owned and polled by the supervisor thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "convoy/v1/common.pb.h"
#include "worker/metrics_parse.h"

namespace convoy {

// `<work_dir>/run/<job_id>.<attempt>.sock`, or, when that does not fit in sockaddr_un's
// sun_path, `/tmp/convoy-<uid>/<hash of it>.sock`.
std::string MetricsSocketPath(const std::string& work_dir, const std::string& job_id, int attempt);

class MetricsSocket {
 public:
  // The rank whose process has this pid or leads this process group, or -1.
  using RankOf = std::function<int(pid_t pid, pid_t pgid)>;

  // Creates the parent directory, replaces a stale socket file, binds and listens.
  // `label` names the attempt in log lines.
  static StatusOr<std::unique_ptr<MetricsSocket>> Open(const std::string& path, std::string label);
  // Closes every connection and the listener and removes the socket file.
  ~MetricsSocket();
  MetricsSocket(const MetricsSocket&) = delete;
  MetricsSocket& operator=(const MetricsSocket&) = delete;

  const std::string& path() const { return path_; }
  // The descriptors to poll for POLLIN: the listener and every connection.
  std::vector<int> PollFds() const;
  // `fd` (one of PollFds) is readable or hung up: accepts new connections or reads whole
  // lines, appending the parsed records to `out` with rank and time_unix_ms set.
  void OnReadable(int fd, const RankOf& rank_of, int64_t now_unix_ms,
                  std::vector<v1::MetricRecord>* out);
  // Reads everything already written to every connection (pending ones included): called
  // before the socket is closed, once the attempt's ranks have ended.
  void Drain(int64_t now_unix_ms, std::vector<v1::MetricRecord>* out);
  // Records dropped as malformed so far (for tests and logs).
  int64_t dropped() const { return dropped_; }

 private:
  struct Conn {
    int fd = -1;
    int rank = -1;  // -1: not identified; the record's "rank" field decides
    MetricLineSplitter lines;
  };
  MetricsSocket(int listen_fd, std::string path, std::string label);
  void Accept(const RankOf& rank_of);
  void Read(Conn& c, int64_t now_unix_ms, std::vector<v1::MetricRecord>* out);
  void Dropped(const std::string& why);

  const int listen_fd_;
  const std::string path_;
  const std::string label_;
  std::vector<std::unique_ptr<Conn>> conns_;
  int64_t dropped_ = 0;
  int64_t last_warning_ms_ = 0;
  int64_t suppressed_ = 0;
};

}  // namespace convoy

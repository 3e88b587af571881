// One attempt's metrics socket: a Unix stream socket at CONVOY_METRICS_SOCKET to which the
// attempt's ranks connect and write newline-delimited JSON records.
//
// Private (issue 18): the socket file is 0600 and belongs to the ranks' user, and each
// connection is identified from SO_PEERCRED: a peer of another uid, or one that is not a rank
// of the attempt (its pid or its process group leader is a rank's), is refused; so is a
// process that has already exited when the worker accepts it (its group can no longer be
// read): a short-lived writer should wait for the worker to close the connection. A record
// never chooses its rank: the connection's rank is stamped on it, and a record whose "rank"
// field names another rank is dropped. Bad input (garbage, non-objects, lines over 64 KiB, a
// truncated last line) is dropped too; every drop is counted and logged, rate-limited.
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
#include "worker/exec/metrics_parse.h"

namespace convoy {

// `<work_dir>/run/<job_id>.<attempt>.sock`, or, when that does not fit in sockaddr_un's
// sun_path, `<fallback_dir>/<hash of it>.sock` (a directory the worker makes with mkdtemp:
// MakeSocketFallbackDir). Empty when it does not fit and `fallback_dir` is empty.
std::string MetricsSocketPath(const std::string& work_dir, const std::string& fallback_dir,
                              const std::string& job_id, int attempt);

// Makes a fresh private directory `/tmp/convoy-XXXXXX` (mkdtemp: an unpredictable name,
// 0700, nobody else's), searchable by others (0711) when `searchable`, for socket paths
// too long for the work dir.
StatusOr<std::string> MakeSocketFallbackDir(bool searchable);

class MetricsSocket {
 public:
  // The rank whose process has this pid or leads this process group, or -1.
  using RankOf = std::function<int(pid_t pid, pid_t pgid)>;

  // Replaces a stale socket file, binds and listens (the parent directory must exist). The
  // file is 0600 and given to `ranks_uid`:`ranks_gid` (the user the ranks run as), and only
  // that uid's connections are accepted. `label` names the attempt in log lines.
  static StatusOr<std::unique_ptr<MetricsSocket>> Open(const std::string& path, std::string label,
                                                       uid_t ranks_uid, gid_t ranks_gid);
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
  void Drain(const RankOf& rank_of, int64_t now_unix_ms, std::vector<v1::MetricRecord>* out);
  // Records (and refused connections) dropped so far (for tests and logs).
  int64_t dropped() const { return dropped_; }

 private:
  struct Conn {
    int fd = -1;
    int rank = -1;  // the rank of the peer (always identified: others are refused)
    MetricLineSplitter lines;
  };
  MetricsSocket(int listen_fd, std::string path, std::string label, uid_t ranks_uid);
  void Accept(const RankOf& rank_of);
  void Read(Conn& c, int64_t now_unix_ms, std::vector<v1::MetricRecord>* out);
  void Dropped(const std::string& why);

  const int listen_fd_;
  const std::string path_;
  const std::string label_;
  const uid_t ranks_uid_;
  std::vector<std::unique_ptr<Conn>> conns_;
  int64_t dropped_ = 0;
  int64_t last_warning_ms_ = 0;
  int64_t suppressed_ = 0;
};

}  // namespace convoy

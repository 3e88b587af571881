// Writes metric records (one JSON object a line) to CONVOY_METRICS_SOCKET. Never blocks
// training: a record that cannot be written at once is dropped.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace convoy::trainer {

class MetricsSink {
 public:
  // Connects to the Unix socket at `path` (empty: records are dropped).
  explicit MetricsSink(const std::string& path);
  ~MetricsSink();
  // {"kind": kind, key: value, ..., text key: "text", ...}
  void Write(const std::string& kind, const std::vector<std::pair<std::string, double>>& fields,
             const std::vector<std::pair<std::string, std::string>>& texts = {});

 private:
  int fd_ = -1;
};

}  // namespace convoy::trainer

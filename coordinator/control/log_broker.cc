#include "coordinator/control/log_broker.h"

#include <algorithm>
#include <vector>

namespace convoy {

int64_t LogBroker::Add(LogFn fn, int wait_ms, const std::string& worker) {
  const int64_t id = next_id_++;
  pending_[id] = Pending{
      std::move(fn), clock_.NowMonotonicMs() + std::max(wait_ms, 0) + answer_timeout_ms_, worker};
  return id;
}

void LogBroker::Cancel(int64_t id) { pending_.erase(id); }

bool LogBroker::Answer(const v1::LogData& data, const std::string& from) {
  auto it = pending_.find(data.request_id());
  if (it == pending_.end()) return false;
  if (!it->second.worker.empty() && it->second.worker != from) return false;
  LogFn fn = std::move(it->second.fn);
  pending_.erase(it);
  fn(data);
  return true;
}

int LogBroker::Expire() {
  const int64_t now = clock_.NowMonotonicMs();
  std::vector<LogFn> expired;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now < it->second.deadline_mono_ms) {
      ++it;
      continue;
    }
    expired.push_back(std::move(it->second.fn));
    it = pending_.erase(it);
  }
  for (LogFn& fn : expired) {
    fn(Status::Unavailable("the worker did not answer the log request in time"));
  }
  return static_cast<int>(expired.size());
}

}  // namespace convoy

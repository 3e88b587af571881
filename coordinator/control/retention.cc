#include "coordinator/control/retention.h"

#include <algorithm>
#include <utility>

#include "coordinator/state/job_state_machine.h"

namespace convoy {

std::vector<std::string> Retention::Due(const JobTable& table) {
  std::vector<std::string> out;
  const int64_t now_mono = clock_.NowMonotonicMs();
  if (now_mono < next_look_mono_ms_) return out;
  next_look_mono_ms_ = now_mono + kIntervalMs;
  if (max_age_ms_ <= 0 && max_count_ <= 0) return out;
  // Finished jobs by when they ended (their last event), oldest first.
  std::vector<std::pair<int64_t, std::string>> finished;
  finished.reserve(table.size() - table.active().size());
  for (const auto& [id, r] : table.records()) {
    if (!IsTerminal(r.job.state())) continue;
    const int64_t ended = r.job.events_size() > 0
                              ? r.job.events(r.job.events_size() - 1).time_unix_ms()
                              : r.job.updated_unix_ms();
    finished.emplace_back(ended, id);
  }
  std::sort(finished.begin(), finished.end());
  const int64_t now = clock_.NowUnixMs();
  size_t over_count = 0;
  if (max_count_ > 0 && finished.size() > static_cast<size_t>(max_count_)) {
    over_count = finished.size() - static_cast<size_t>(max_count_);
  }
  for (size_t i = 0; i < finished.size() && out.size() < kBatch; ++i) {
    const bool too_old = max_age_ms_ > 0 && now - finished[i].first > max_age_ms_;
    if (!too_old && i >= over_count) break;  // sorted: every later job is newer
    const JobRecord& r = table.at(finished[i].second);
    if (r.rt.attempt >= 0 && !r.rt.released) continue;  // its ranks are being stopped
    out.push_back(finished[i].second);
  }
  return out;
}

}  // namespace convoy

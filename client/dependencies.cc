#include "client/dependencies.h"

#include <limits>

#include "spec/dependency_spec.h"

namespace convoy {

std::string FormatDependencies(const v1::Job& job) {
  if (job.spec().after_size() == 0) return "";
  std::string out;
  for (const v1::JobDependency& d : job.waiting_for()) {
    out += "  waiting:  for " + WaitText(d) + "\n";
  }
  out += "  after:    ";
  for (int i = 0; i < job.spec().after_size(); ++i) {
    const v1::JobDependency& d = job.spec().after(i);
    out += (i == 0 ? "" : ", ") + d.job_id() + " (" + ConditionWord(ConditionOf(d)) + ")";
  }
  return out + "\n";
}

bool ShownInQueue(const v1::Job& job) {
  return job.queue_position() > 0 || job.waiting_for_size() > 0;
}

std::string QueuePositionCell(const v1::Job& job) {
  return job.queue_position() > 0 ? std::to_string(job.queue_position()) : "-";
}

bool QueueOrderLess(const v1::Job& a, const v1::Job& b) {
  constexpr int64_t kLast = std::numeric_limits<int64_t>::max();
  const int64_t pa = a.queue_position() > 0 ? a.queue_position() : kLast;
  const int64_t pb = b.queue_position() > 0 ? b.queue_position() : kLast;
  if (pa != pb) return pa < pb;
  if (a.id().size() != b.id().size()) return a.id().size() < b.id().size();
  return a.id() < b.id();
}

}  // namespace convoy

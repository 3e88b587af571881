// An attempt on a worker: its job's id and uid (another job of the same id, another cluster's
// or this one's after a fresh state directory, is another key) and its number. Every message
// about an attempt names all three.
#pragma once

#include <string>
#include <tuple>

namespace convoy {

struct AttemptKey {
  std::string job_id;
  int attempt = 0;
  std::string job_uid;
  bool operator<(const AttemptKey& o) const {
    return std::tie(job_id, attempt, job_uid) < std::tie(o.job_id, o.attempt, o.job_uid);
  }
  bool operator==(const AttemptKey& o) const {
    return std::tie(job_id, attempt, job_uid) == std::tie(o.job_id, o.attempt, o.job_uid);
  }
};

}  // namespace convoy

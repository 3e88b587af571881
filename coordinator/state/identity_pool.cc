#include "coordinator/state/identity_pool.h"

namespace convoy {

int32_t IdentityPool::Take(const std::string& job_uid) {
  int32_t n = 1;
  for (const auto& [held, uid] : held_) {  // ascending: the first gap
    if (held != n) break;
    ++n;
  }
  held_[n] = job_uid;
  return n;
}

void IdentityPool::Release(const std::string& job_uid) {
  for (auto it = held_.begin(); it != held_.end(); ++it) {
    if (it->second == job_uid) {
      held_.erase(it);
      return;
    }
  }
}

}  // namespace convoy

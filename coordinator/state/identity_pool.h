// Job identities (Job.identity): small numbers, one per job, from which a worker derives the
// job's own Unix user and group (worker/job_identity.h). The pool gives each new job the
// lowest free number, and a number is free again only when the caller releases it: when its
// job was deleted and no worker still holds that job's files (so a worker never sees one
// identity own the files of two jobs).
//
// Threading: none of its own; called with the Coordinator's lock held. O(identities held).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace convoy {

class IdentityPool {
 public:
  // The lowest free identity (from 1), now held by the job with uid `job_uid`.
  int32_t Take(const std::string& job_uid);
  // `identity` is held by `job_uid` (a job recovered from the store).
  void Hold(int32_t identity, const std::string& job_uid) { held_[identity] = job_uid; }
  // Frees the identity held by `job_uid`, if any.
  void Release(const std::string& job_uid);
  size_t held() const { return held_.size(); }

 private:
  std::map<int32_t, std::string> held_;  // identity -> the job's uid
};

}  // namespace convoy

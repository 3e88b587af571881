// Quotas per user (README "Sharing a cluster"): how many processes and GPUs one owner's
// running jobs may hold, and how many jobs they may have waiting. Limits come, field by field,
// from the most specific rule: `--quota user:NAME=...`, then `--quota role:ROLE=...` (the role
// of the token that submitted the job), then --max-slots-per-user / --max-queued-per-user.
// Pure logic, no I/O.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/status.h"
#include "coordinator/sched/scheduler.h"

namespace convoy {

class QuotaRules {
 public:
  // One rule's limits; unset fields fall back to the next rule. 0 means no limit.
  struct Limits {
    std::optional<int> slots, gpus, queued;
  };

  // The defaults for everyone (--max-slots-per-user, --max-queued-per-user).
  void SetDefaults(int slots, int queued);
  // Parses and adds one --quota rule: "role:user=slots:8,gpus:2,queued:20" or
  // "user:alice=slots:32". INVALID_ARGUMENT naming --quota and what is wrong.
  Status Add(const std::string& rule);

  // The quota of `owner` whose jobs were submitted with `role` ("" with --insecure: no quota
  // at all, since such jobs have no owner).
  Quota For(const std::string& owner, const std::string& role) const;
  bool empty() const {
    return default_.slots.value_or(0) == 0 && default_.queued.value_or(0) == 0 &&
           default_.gpus.value_or(0) == 0 && by_role_.empty() && by_user_.empty();
  }

 private:
  Limits default_;
  std::map<std::string, Limits> by_role_;
  std::map<std::string, Limits> by_user_;
};

}  // namespace convoy

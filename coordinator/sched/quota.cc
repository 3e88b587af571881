#include "coordinator/sched/quota.h"

#include <charconv>
#include <sstream>

#include "common/util.h"

namespace convoy {

void QuotaRules::SetDefaults(int slots, int queued) {
  default_.slots = slots;
  default_.queued = queued;
}

Status QuotaRules::Add(const std::string& rule) {
  auto bad = [&rule](const std::string& why) {
    return Status::InvalidArgument("--quota '" + rule + "': " + why +
                                   " (expected role:ROLE=slots:N,gpus:N,queued:N or "
                                   "user:NAME=...)");
  };
  const size_t eq = rule.find('=');
  if (eq == std::string::npos) return bad("no '='");
  const std::string subject = rule.substr(0, eq);
  const size_t colon = subject.find(':');
  if (colon == std::string::npos) return bad("the subject must be role:ROLE or user:NAME");
  const std::string kind = subject.substr(0, colon), name = subject.substr(colon + 1);
  if (kind != "role" && kind != "user") return bad("the subject must be role:ROLE or user:NAME");
  if (kind == "role" && name != "user" && name != "admin") {
    return bad("roles that submit jobs are user and admin");
  }
  if (kind == "user" && !IsValidName(name)) return bad("'" + name + "' is not a user name");
  Limits limits;
  std::stringstream items(rule.substr(eq + 1));
  std::string item;
  bool any = false;
  while (std::getline(items, item, ',')) {
    const size_t c = item.find(':');
    if (c == std::string::npos) return bad("'" + item + "' is not LIMIT:N");
    const std::string what = item.substr(0, c), number = item.substr(c + 1);
    int n = -1;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (ec != std::errc() || ptr != number.data() + number.size() || n < 0) {
      return bad("'" + number + "' is not a number >= 0");
    }
    if (what == "slots") {
      limits.slots = n;
    } else if (what == "gpus") {
      limits.gpus = n;
    } else if (what == "queued") {
      limits.queued = n;
    } else {
      return bad("unknown limit '" + what + "' (slots, gpus, queued)");
    }
    any = true;
  }
  if (!any) return bad("no limits");
  (kind == "role" ? by_role_ : by_user_)[name] = limits;
  return Status::Ok();
}

Quota QuotaRules::For(const std::string& owner, const std::string& role) const {
  Quota q;
  if (owner.empty()) return q;
  const Limits* user = nullptr;
  const Limits* by_role = nullptr;
  if (auto it = by_user_.find(owner); it != by_user_.end()) user = &it->second;
  if (auto it = by_role_.find(role); it != by_role_.end()) by_role = &it->second;
  auto pick = [&](std::optional<int> Limits::*field, const std::string& flag, int* out,
                  std::string* source) {
    if (user != nullptr && (user->*field).has_value()) {
      *out = *(user->*field);
      *source = "--quota user:" + owner;
    } else if (by_role != nullptr && (by_role->*field).has_value()) {
      *out = *(by_role->*field);
      *source = "--quota role:" + role;
    } else {
      *out = (default_.*field).value_or(0);
      *source = flag;
    }
  };
  std::string slots_source, gpus_source, queued_source;
  pick(&Limits::slots, "--max-slots-per-user", &q.slots, &slots_source);
  pick(&Limits::gpus, "--quota", &q.gpus, &gpus_source);
  pick(&Limits::queued, "--max-queued-per-user", &q.queued, &queued_source);
  q.source = slots_source;
  q.gpus_source = gpus_source;
  q.queued_source = queued_source;
  return q;
}

}  // namespace convoy

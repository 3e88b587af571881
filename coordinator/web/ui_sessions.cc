#include "coordinator/web/ui_sessions.h"

#include <iterator>
#include <vector>

#include "common/pki.h"

namespace convoy {

UiSessions::UiSessions(const Clock& clock, Options options,
                       std::function<bool(const std::string&)> still_valid)
    : clock_(clock), options_(options), still_valid_(std::move(still_valid)) {}

bool UiSessions::TokenValid(const Principal& who) const {
  if (!still_valid_ || who.token_id.empty()) return true;
  return still_valid_(who.token_id);
}

bool UiSessions::Expired(const UiSession& s, int64_t now) const {
  return now - s.last_seen_ms >= options_.idle_ms || now - s.opened_ms >= options_.max_age_ms;
}

UiLoginCode UiSessions::IssueCode(const Principal& who) {
  UiLoginCode out;
  out.code = RandomHex(32);
  out.expires_unix_ms = clock_.NowUnixMs() + options_.login_code_ttl_ms;
  const int64_t now = clock_.NowMonotonicMs();
  MutexLock lock(mu_);
  for (auto it = codes_.begin(); it != codes_.end();) {
    it = now >= it->second.expires_ms ? codes_.erase(it) : std::next(it);
  }
  if (codes_.size() >= options_.max_codes) {
    auto oldest = codes_.begin();
    for (auto it = codes_.begin(); it != codes_.end(); ++it) {
      if (it->second.issued_ms < oldest->second.issued_ms) oldest = it;
    }
    codes_.erase(oldest);
  }
  codes_[Key(out.code)] = Code{who, now + options_.login_code_ttl_ms, now};
  return out;
}

StatusOr<UiSession> UiSessions::Redeem(const std::string& code) {
  Principal who;
  {
    MutexLock lock(mu_);
    auto it = codes_.find(Key(code));
    if (it == codes_.end()) {
      return Status::Unauthenticated(
          "this login link is unknown or was used already: run `convoy ui` for a new one");
    }
    const Code found = it->second;
    codes_.erase(it);  // one use, whatever follows
    if (clock_.NowMonotonicMs() >= found.expires_ms) {
      return Status::Unauthenticated(
          "this login link expired (a link is valid for a minute): run `convoy ui` for a new "
          "one");
    }
    who = found.who;
  }
  if (!TokenValid(who)) {
    return Status::Unauthenticated(
        "the token this login link was made with was revoked or "
        "expired");
  }
  MutexLock lock(mu_);
  return OpenLocked(who);
}

UiSession UiSessions::Open(const Principal& who) {
  MutexLock lock(mu_);
  return OpenLocked(who);
}

UiSession UiSessions::OpenLocked(const Principal& who) {
  const int64_t now = clock_.NowMonotonicMs();
  if (sessions_.size() >= options_.max_sessions) {
    auto oldest = sessions_.begin();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.last_seen_ms < oldest->second.last_seen_ms) oldest = it;
    }
    sessions_.erase(oldest);
  }
  UiSession s;
  s.id = RandomHex(32);
  s.csrf = RandomHex(32);
  s.who = who;
  s.opened_ms = now;
  s.last_seen_ms = now;
  UiSession kept = s;
  kept.id.clear();  // only its hash, the map's key
  sessions_[Key(s.id)] = kept;
  return s;
}

StatusOr<UiSession> UiSessions::Find(const std::string& id) {
  if (id.empty()) return Status::Unauthenticated("not logged in");
  const std::string key = Key(id);
  UiSession s;
  {
    MutexLock lock(mu_);
    auto it = sessions_.find(key);
    if (it == sessions_.end()) return Status::Unauthenticated("not logged in (or logged out)");
    const int64_t now = clock_.NowMonotonicMs();
    if (Expired(it->second, now)) {
      sessions_.erase(it);
      return Status::Unauthenticated("the session expired: log in again");
    }
    it->second.last_seen_ms = now;
    s = it->second;
  }
  if (!TokenValid(s.who)) {
    End(id);
    return Status::Unauthenticated("the session's token was revoked or expired: log in again");
  }
  s.id = id;
  return s;
}

void UiSessions::End(const std::string& id) {
  MutexLock lock(mu_);
  sessions_.erase(Key(id));
}

std::string UiSessions::Key(const std::string& id) { return Sha256Hex(id); }

std::vector<std::string> UiSessions::Sweep() {
  std::vector<std::pair<std::string, Principal>> check;
  std::vector<std::string> ended;
  {
    MutexLock lock(mu_);
    const int64_t now = clock_.NowMonotonicMs();
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (Expired(it->second, now)) {
        ended.push_back(it->first);
        it = sessions_.erase(it);
      } else {
        check.emplace_back(it->first, it->second.who);
        ++it;
      }
    }
    for (auto it = codes_.begin(); it != codes_.end();) {
      it = now >= it->second.expires_ms ? codes_.erase(it) : std::next(it);
    }
  }
  // The token store's own lock, never under mu_.
  std::vector<std::string> dead;
  for (const auto& [key, who] : check) {
    if (!TokenValid(who)) dead.push_back(key);
  }
  if (!dead.empty()) {
    MutexLock lock(mu_);
    for (const std::string& key : dead) {
      if (sessions_.erase(key) != 0) ended.push_back(key);
    }
  }
  return ended;
}

size_t UiSessions::size() {
  MutexLock lock(mu_);
  return sessions_.size();
}

bool UiSessions::CsrfMatches(const UiSession& session, const std::string& given) {
  return !session.csrf.empty() && ConstantTimeEquals(session.csrf, given);
}

}  // namespace convoy

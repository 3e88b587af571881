// The web UI's logins and sessions (README "The web UI"). A browser never holds a bearer
// token: `convoy ui` asks the coordinator (JobService.CreateUiLogin, with the CLI's token)
// for a one-time login code valid a minute, the login page exchanges it for a session, and
// the session is an HttpOnly, Secure, SameSite=Strict cookie bound to that token: its user,
// role and token id. A token pasted into the login page opens a session the same way.
//
//  - A code works once, within `login_code_ttl_ms` of its issue; a session ends after
//    `idle_ms` without a request, `max_age_ms` after it opened, at logout, or as soon as its
//    token may no longer be used (revoked, expired): Find checks the token on every request,
//    and the streams a session holds are closed by Authorizer::CloseRevokedStreams within
//    its period (250 ms), as gRPC's are.
//  - Each session has its own CSRF token, sent by the page in X-CSRF-Token on every request
//    that changes anything, and compared in constant time.
//  - Codes and session ids are 32 random bytes; only their SHA-256 is kept (a lookup leaks
//    no timing of the secret itself). Bounded: past `max_sessions` (or `max_codes`) the
//    oldest is dropped.
//  - Sessions live in the coordinator's memory: a coordinator restart (or a failover to
//    another leader) ends them, and `convoy ui` makes a new login URL.
//
// Threading: any thread; one mutex, never held over a call out (the token check included).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "coordinator/rpc/auth.h"

namespace convoy {

struct UiSession {
  std::string id;            // the cookie's value (only when just opened; Find returns it too)
  std::string csrf;          // the page's X-CSRF-Token
  Principal who;             // the token's user, role and id; kLocal under --insecure
  int64_t opened_ms = 0;     // monotonic
  int64_t last_seen_ms = 0;  // monotonic
};

struct UiLoginCode {
  std::string code;
  int64_t expires_unix_ms = 0;
};

class UiSessions {
 public:
  struct Options {
    int64_t login_code_ttl_ms = 60'000;
    int64_t idle_ms = 8 * 3600'000;
    int64_t max_age_ms = 24 * 3600'000;
    size_t max_sessions = 10'000;
    size_t max_codes = 1'000;
  };
  // `still_valid(token_id)`: whether a token may still be used (TokenStore::StillValid);
  // null, or a principal without a token (--insecure's local admin): always.
  UiSessions(const Clock& clock, Options options,
             std::function<bool(const std::string& token_id)> still_valid);

  // A one-time login code for `who` (a person's token, or the local admin).
  UiLoginCode IssueCode(const Principal& who) EXCLUDES(mu_);
  // Exchanges a code for a new session; the code is spent either way. UNAUTHENTICATED when
  // it is unknown, spent or expired, or its token may no longer be used.
  StatusOr<UiSession> Redeem(const std::string& code) EXCLUDES(mu_);
  // A new session for `who` (a token the caller checked).
  UiSession Open(const Principal& who) EXCLUDES(mu_);
  // The session whose cookie is `id`, marked used now; UNAUTHENTICATED (and the session
  // ended) when unknown, idle past idle_ms, older than max_age_ms, or its token may no
  // longer be used.
  StatusOr<UiSession> Find(const std::string& id) EXCLUDES(mu_);
  // Logout. Unknown ids are ignored.
  void End(const std::string& id) EXCLUDES(mu_);
  // Ends the sessions whose time is up or whose token may no longer be used; their keys.
  std::vector<std::string> Sweep() EXCLUDES(mu_);
  // What names a session without its secret: the SHA-256 of its cookie (for the streams it
  // holds, UiStreams::EndSession).
  static std::string Key(const std::string& id);
  size_t size() EXCLUDES(mu_);

  // Whether `given` is the session's CSRF token (constant time).
  static bool CsrfMatches(const UiSession& session, const std::string& given);

 private:
  struct Code {
    Principal who;
    int64_t expires_ms = 0;  // monotonic
    int64_t issued_ms = 0;
  };
  bool TokenValid(const Principal& who) const;
  UiSession OpenLocked(const Principal& who) REQUIRES(mu_);
  bool Expired(const UiSession& s, int64_t now) const;

  const Clock& clock_;
  const Options options_;
  const std::function<bool(const std::string&)> still_valid_;
  Mutex mu_;
  std::map<std::string, Code> codes_ GUARDED_BY(mu_);          // by SHA-256 of the code
  std::map<std::string, UiSession> sessions_ GUARDED_BY(mu_);  // by SHA-256 of the id
};

}  // namespace convoy

// Bearer tokens of the cluster's people and join tokens of its workers, in the coordinator's
// SQLite state (<state-dir>/tokens.db, table `tokens`; a file of its own so that the local
// `token` commands never touch the jobs' database). A token is shown once, when it is
// made; only a salted SHA-256 of its secret is stored. The secret is 32 random bytes, so a fast
// hash is enough: there is nothing to guess (a password would need a slow one).
//
// `convoy-coordinator token create|list|revoke` and the running coordinator each open the
// file with their own connection; the coordinator keeps the table in memory and reloads it
// when another connection has committed (PRAGMA data_version), so that a revocation takes
// effect on the next call. Last use is kept in memory and written in batches (Flush).
//
// Thread-safe; every method takes the store's own mutex (never the coordinator's state lock).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace convoy {

// What a token lets its holder do (README "Securing a cluster").
enum class Role { kViewer, kUser, kAdmin, kWorker };

const char* RoleName(Role role);
StatusOr<Role> ParseRole(const std::string& name);

struct TokenRecord {
  std::string id;    // public part, "cvy_<id>.<secret>"
  std::string user;  // the person; for a join token "join"
  Role role = Role::kViewer;
  int64_t created_ms = 0;
  int64_t expires_ms = 0;  // 0: never
  int64_t last_used_ms = 0;
  int uses_left = -1;  // join tokens: -1 unlimited
  bool revoked = false;
  // Join tokens: the one worker name it joins (`token create --role worker --name w1`), which
  // it may join even while that name is held; empty: any name not held.
  std::string name;
};

class TokenStore {
 public:
  static StatusOr<std::unique_ptr<TokenStore>> Open(const std::string& db_path);
  ~TokenStore();

  // Makes a token; returns the whole token text, which is not stored anywhere.
  StatusOr<std::string> Create(const std::string& user, Role role, int64_t ttl_ms, int uses,
                               int64_t now_ms, TokenRecord* made = nullptr,
                               const std::string& name = "") EXCLUDES(mu_);

  // Every token, newest first, without secrets.
  StatusOr<std::vector<TokenRecord>> List() EXCLUDES(mu_);

  // Revokes the token with this id, or every token of this user. NOT_FOUND when none.
  StatusOr<int> Revoke(const std::string& id_or_user) EXCLUDES(mu_);

  // The token's record when the token is known, its secret right, and it is neither revoked,
  // expired nor used up; UNAUTHENTICATED saying which otherwise. `consume` takes one use of
  // a limited join token (written at once).
  StatusOr<TokenRecord> Check(const std::string& token, int64_t now_ms, bool consume) EXCLUDES(mu_);

  // Writes the last-use times noted since the previous flush (one transaction).
  void Flush() EXCLUDES(mu_);

  // Whether the token with this id may still be used (known, not revoked, not expired):
  // open streams of one that may not are closed (Authorizer::CloseRevokedStreams).
  bool StillValid(const std::string& id, int64_t now_ms) EXCLUDES(mu_);

  // Worker names that hold a certificate the cluster CA issued (Join, Renew), table
  // `worker_certs`: a Join for a name whose certificate has not expired is refused unless its
  // token is bound to that name. 0: none recorded.
  Status RecordCertificate(const std::string& name, int64_t not_after_s) EXCLUDES(mu_);
  StatusOr<int64_t> CertificateNotAfter(const std::string& name) EXCLUDES(mu_);
  // Drops the name's record (ForgetWorker); whether there was one.
  StatusOr<bool> ForgetCertificate(const std::string& name) EXCLUDES(mu_);

 private:
  struct Row {
    TokenRecord record;
    std::string salt;
    std::string hash;
  };
  TokenStore(sqlite3* db) : db_(db) {}
  Status Exec(const char* sql) REQUIRES(mu_);
  Status ReloadIfChanged() REQUIRES(mu_);

  Mutex mu_;
  sqlite3* db_;
  int64_t data_version_ GUARDED_BY(mu_) = -1;
  std::map<std::string, Row> rows_ GUARDED_BY(mu_);
  std::map<std::string, int64_t> used_ GUARDED_BY(mu_);  // id -> last use, not yet written
};

// "cvy_<id>.<secret>" -> id and secret; false when the text is not shaped like a token.
bool SplitToken(const std::string& token, std::string* id, std::string* secret);

}  // namespace convoy

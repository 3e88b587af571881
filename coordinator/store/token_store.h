// Bearer tokens of the cluster's people and join tokens of its workers. A token is shown once,
// when it is made; only a salted SHA-256 of its secret is stored. The secret is 32 random
// bytes, so a fast hash is enough: there is nothing to guess (a password would need a slow
// one). Where they are kept is a TokenBackend:
//   - SQLite (the default store): <state-dir>/tokens.db, tables `tokens` and `worker_certs`;
//     a file of its own so that the local `token` commands never touch the jobs' database.
//     The coordinator's poller wakes when the file is written (inotify on tokens.db and its
//     WAL) and every second, and reloads the table when another connection has committed
//     (PRAGMA data_version), so a revocation takes effect within milliseconds.
//   - etcd (--store etcd://, etcd_token_backend.h): keys <prefix>token/<id> and
//     <prefix>worker-cert/<name>, so that every coordinator of the group, and the `token`
//     commands run anywhere that reaches etcd, see the same tokens. The coordinator reloads
//     them every poll_ms on a thread of its own: a revocation takes effect within that; a
//     token it does not know yet (made a moment ago) makes it read them again at once.
//
// `convoy-coordinator token create|list|revoke` and the running coordinator each open the
// store; the coordinator keeps the tokens in memory and answers Check and StillValid from
// there (issue 44: no query on every authenticated call), except for an id it has never seen
// (a token made a moment ago), which makes it read the backend again, at most every 200 ms. Last
// use is kept in memory and written in batches (Flush). A limited join token's use is taken in the
// backend at once, atomically (two coordinators cannot both take its last use).
//
// Thread-safe; the store's own mutex (never the coordinator's state lock) guards the table in
// memory and is never held over a backend call.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
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

// A token as kept: its record and the salted hash of its secret.
struct TokenRow {
  TokenRecord record;
  std::string salt;
  std::string hash;
};

// Where tokens and worker-certificate records are kept. Each method is one round trip (or one
// transaction) and thread-safe.
class TokenBackend {
 public:
  virtual ~TokenBackend() = default;
  // > 0: TokenStore's poller asks MayHaveChanged (and reloads when it says so) every that
  // many ms, and whenever WaitForWrite says something was written. 0: no poller (tests): the
  // tokens are read at Open, and again only for an unknown id.
  virtual int64_t poll_ms() const = 0;
  // Whether anything may have been written since the last LoadAll (by anyone).
  virtual StatusOr<bool> MayHaveChanged() = 0;
  // Waits up to `wait_ms` for a sign that anyone wrote the tokens: true when one came, false
  // when none did. nullopt at once: this backend cannot tell (the poller then only polls).
  virtual std::optional<bool> WaitForWrite(int64_t wait_ms) {
    (void)wait_ms;
    return std::nullopt;
  }
  virtual StatusOr<std::vector<TokenRow>> LoadAll() = 0;
  // Stores a new token (its id is new).
  virtual Status Insert(const TokenRow& row) = 0;
  // Marks revoked every live token whose id is `id` or whose user is `user`; their ids.
  virtual StatusOr<std::vector<std::string>> Revoke(const std::string& id,
                                                    const std::string& user) = 0;
  // Takes one use of a limited token, atomically: false when none was left.
  virtual StatusOr<bool> TakeUse(const std::string& id) = 0;
  // Best effort: raises each token's last use to the time given.
  virtual Status WriteLastUsed(const std::map<std::string, int64_t>& used) = 0;
  virtual Status RecordCertificate(const std::string& name, int64_t not_after_s) = 0;
  virtual StatusOr<int64_t> CertificateNotAfter(const std::string& name) = 0;
  virtual StatusOr<bool> ForgetCertificate(const std::string& name) = 0;
};

class TokenStore {
 public:
  // SQLite, at db_path; the poller looks every `poll_ms` besides when the file is written.
  static StatusOr<std::unique_ptr<TokenStore>> Open(const std::string& db_path,
                                                    int64_t poll_ms = 1000);
  // Any backend (etcd: MakeEtcdTokenBackend); loads the tokens once before returning.
  static StatusOr<std::unique_ptr<TokenStore>> Open(std::unique_ptr<TokenBackend> backend);
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
  // expired nor used up; UNAUTHENTICATED saying which otherwise. From memory (see above).
  // `consume` takes one use of a limited join token (written in the backend at once: Join).
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
  explicit TokenStore(std::unique_ptr<TokenBackend> backend) : backend_(std::move(backend)) {}
  // Reads the backend (without mu_) and replaces the table (with it). `force`: even when the
  // backend says nothing changed.
  Status Reload(bool force) EXCLUDES(mu_);
  void Poll() EXCLUDES(mu_, poll_mu_);

  // The backend is read again for a token it does not know, at most this often.
  static constexpr int64_t kMissReloadMs = 200;
  // How long the poller waits at a time (how soon it stops).
  static constexpr int64_t kWakeMs = 100;
  const std::unique_ptr<TokenBackend> backend_;
  std::atomic<int64_t> last_miss_reload_ms_{0};
  Mutex mu_;
  std::map<std::string, TokenRow> rows_ GUARDED_BY(mu_);
  std::map<std::string, int64_t> used_ GUARDED_BY(mu_);  // id -> last use, not yet written
  // The poller (poll_ms > 0).
  std::thread poller_;
  Mutex poll_mu_;
  CondVar poll_cv_;
  bool stopping_ GUARDED_BY(poll_mu_) = false;
};

// "cvy_<id>.<secret>" -> id and secret; false when the text is not shaped like a token.
bool SplitToken(const std::string& token, std::string* id, std::string* secret);

}  // namespace convoy

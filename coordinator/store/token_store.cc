#include "coordinator/store/token_store.h"

#include <poll.h>
#include <sqlite3.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "common/pki.h"

namespace convoy {
namespace {

constexpr const char* kTokenSchema = R"sql(
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT PRIMARY KEY,
  user TEXT NOT NULL,
  role TEXT NOT NULL,
  salt TEXT NOT NULL,
  hash TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  last_used_ms INTEGER NOT NULL DEFAULT 0,
  uses_left INTEGER NOT NULL DEFAULT -1,
  revoked INTEGER NOT NULL DEFAULT 0,
  name TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS worker_certs (
  name TEXT PRIMARY KEY,
  not_after_s INTEGER NOT NULL
);
)sql";

struct TokenStmt {
  TokenStmt(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &s, nullptr); }
  ~TokenStmt() { sqlite3_finalize(s); }
  TokenStmt& Text(int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  TokenStmt& Int(int i, int64_t v) {
    sqlite3_bind_int64(s, i, v);
    return *this;
  }
  std::string Col(int i) {
    const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
    return t ? t : "";
  }
  sqlite3_stmt* s = nullptr;
};

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kUser:
      return "user";
    case Role::kAdmin:
      return "admin";
    case Role::kWorker:
      return "worker";
  }
  return "?";
}

StatusOr<Role> ParseRole(const std::string& name) {
  for (Role r : {Role::kViewer, Role::kUser, Role::kAdmin, Role::kWorker}) {
    if (name == RoleName(r)) return r;
  }
  return Status::InvalidArgument("--role: '" + name + "' is not admin, user, viewer or worker");
}

bool SplitToken(const std::string& token, std::string* id, std::string* secret) {
  if (token.size() < 8 || token.compare(0, 4, "cvy_") != 0) return false;
  const size_t dot = token.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot + 1 >= token.size()) return false;
  *id = token.substr(4, dot - 4);
  *secret = token.substr(dot + 1);
  auto hex = [](const std::string& s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  };
  return id->size() == 16 && secret->size() == 64 && hex(*id) && hex(*secret);
}

namespace {

// tokens.db: the SQLite backend. One connection, serialized by its own mutex.
class SqliteTokenBackend : public TokenBackend {
 public:
  static StatusOr<std::unique_ptr<SqliteTokenBackend>> Open(const std::string& db_path,
                                                            int64_t poll_ms) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                        nullptr) != SQLITE_OK) {
      std::string why = db ? sqlite3_errmsg(db) : "out of memory";
      sqlite3_close(db);
      return Status::Unavailable(db_path + ": " + why);
    }
    sqlite3_busy_timeout(db, 5000);
    std::unique_ptr<SqliteTokenBackend> b(new SqliteTokenBackend(db, db_path, poll_ms));
    MutexLock lock(b->mu_);
    CONVOY_RETURN_IF_ERROR(b->Exec("PRAGMA journal_mode=WAL"));
    CONVOY_RETURN_IF_ERROR(b->Exec(kTokenSchema));
    // A tokens.db made before join tokens could be bound to a name gets the column.
    bool has_name = false;
    TokenStmt cols(db, "PRAGMA table_info(tokens)");
    while (sqlite3_step(cols.s) == SQLITE_ROW) has_name = has_name || cols.Col(1) == "name";
    if (!has_name) {
      CONVOY_RETURN_IF_ERROR(
          b->Exec("ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT ''"));
    }
    return b;
  }
  ~SqliteTokenBackend() override {
    if (inotify_ >= 0) close(inotify_);
    sqlite3_close(db_);
  }

  int64_t poll_ms() const override { return poll_ms_; }

  // inotify on tokens.db and its WAL (where another connection's commit lands first). Called
  // by the poller only.
  std::optional<bool> WaitForWrite(int64_t wait_ms) override {
    if (inotify_ < 0) return std::nullopt;
    const uint32_t mask = IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;
    for (Watch& w : watches_) {
      if (w.wd < 0) w.wd = inotify_add_watch(inotify_, w.path.c_str(), mask);  // made later
    }
    pollfd p{inotify_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(wait_ms)) <= 0) return false;
    alignas(inotify_event) char buf[4096];
    bool any = false;
    for (ssize_t n; (n = read(inotify_, buf, sizeof(buf))) > 0;) {
      for (ssize_t at = 0; at < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
        if (e->mask & IN_IGNORED) {  // the file went (the WAL, once every connection closed)
          for (Watch& w : watches_) {
            if (w.wd == e->wd) w.wd = -1;
          }
        }
        any = true;
        at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
    return any;
  }

  StatusOr<bool> MayHaveChanged() override {
    MutexLock lock(mu_);
    TokenStmt q(db_, "PRAGMA data_version");
    if (sqlite3_step(q.s) != SQLITE_ROW) return Error("tokens");
    const int64_t version = sqlite3_column_int64(q.s, 0);
    const bool changed = version != loaded_version_;
    return changed;
  }

  StatusOr<std::vector<TokenRow>> LoadAll() override {
    MutexLock lock(mu_);
    int64_t version = -1;
    {
      TokenStmt q(db_, "PRAGMA data_version");
      if (sqlite3_step(q.s) == SQLITE_ROW) version = sqlite3_column_int64(q.s, 0);
    }
    TokenStmt q(
        db_,
        "SELECT id, user, role, salt, hash, created_ms, expires_ms, last_used_ms, uses_left, "
        "revoked, name FROM tokens");
    if (q.s == nullptr) return Error("tokens");
    std::vector<TokenRow> rows;
    int rc;
    while ((rc = sqlite3_step(q.s)) == SQLITE_ROW) {
      TokenRow row;
      row.record.id = q.Col(0);
      row.record.user = q.Col(1);
      auto role = ParseRole(q.Col(2));
      if (!role.ok()) continue;  // written by a newer version: not a role this one grants
      row.record.role = *role;
      row.salt = q.Col(3);
      row.hash = q.Col(4);
      row.record.created_ms = sqlite3_column_int64(q.s, 5);
      row.record.expires_ms = sqlite3_column_int64(q.s, 6);
      row.record.last_used_ms = sqlite3_column_int64(q.s, 7);
      row.record.uses_left = static_cast<int>(sqlite3_column_int64(q.s, 8));
      row.record.revoked = sqlite3_column_int64(q.s, 9) != 0;
      row.record.name = q.Col(10);
      rows.push_back(std::move(row));
    }
    if (rc != SQLITE_DONE) return Error("tokens");
    loaded_version_ = version;
    return rows;
  }

  Status Insert(const TokenRow& row) override {
    MutexLock lock(mu_);
    TokenStmt ins(
        db_,
        "INSERT INTO tokens (id, user, role, salt, hash, created_ms, expires_ms, uses_left, "
        "name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.Text(1, row.record.id)
        .Text(2, row.record.user)
        .Text(3, RoleName(row.record.role))
        .Text(4, row.salt)
        .Text(5, row.hash)
        .Int(6, row.record.created_ms)
        .Int(7, row.record.expires_ms)
        .Int(8, row.record.uses_left)
        .Text(9, row.record.name);
    if (sqlite3_step(ins.s) != SQLITE_DONE) return Error("tokens");
    return Status::Ok();
  }

  StatusOr<std::vector<std::string>> Revoke(const std::string& id,
                                            const std::string& user) override {
    MutexLock lock(mu_);
    std::vector<std::string> ids;
    {
      TokenStmt q(db_, "SELECT id FROM tokens WHERE (id = ? OR user = ?) AND revoked = 0");
      q.Text(1, id).Text(2, user);
      while (sqlite3_step(q.s) == SQLITE_ROW) ids.push_back(q.Col(0));
    }
    TokenStmt up(db_, "UPDATE tokens SET revoked = 1 WHERE (id = ? OR user = ?) AND revoked = 0");
    up.Text(1, id).Text(2, user);
    if (sqlite3_step(up.s) != SQLITE_DONE) return Error("tokens");
    return ids;
  }

  StatusOr<bool> TakeUse(const std::string& id) override {
    MutexLock lock(mu_);
    TokenStmt up(db_, "UPDATE tokens SET uses_left = uses_left - 1 WHERE id = ? AND uses_left > 0");
    up.Text(1, id);
    if (sqlite3_step(up.s) != SQLITE_DONE) return Error("tokens");
    return sqlite3_changes(db_) == 1;
  }

  Status WriteLastUsed(const std::map<std::string, int64_t>& used) override {
    MutexLock lock(mu_);
    CONVOY_RETURN_IF_ERROR(Exec("BEGIN"));
    for (const auto& [id, ms] : used) {
      TokenStmt up(db_, "UPDATE tokens SET last_used_ms = ? WHERE id = ? AND last_used_ms < ?");
      up.Int(1, ms).Text(2, id).Int(3, ms);
      sqlite3_step(up.s);
    }
    if (Status st = Exec("COMMIT"); !st.ok()) {
      Exec("ROLLBACK").ok();
      return st;
    }
    return Status::Ok();
  }

  Status RecordCertificate(const std::string& name, int64_t not_after_s) override {
    MutexLock lock(mu_);
    TokenStmt up(db_,
                 "INSERT INTO worker_certs (name, not_after_s) VALUES (?, ?) "
                 "ON CONFLICT(name) DO UPDATE SET not_after_s = excluded.not_after_s");
    up.Text(1, name).Int(2, not_after_s);
    if (sqlite3_step(up.s) != SQLITE_DONE) return Error("worker_certs");
    return Status::Ok();
  }

  StatusOr<int64_t> CertificateNotAfter(const std::string& name) override {
    MutexLock lock(mu_);
    TokenStmt q(db_, "SELECT not_after_s FROM worker_certs WHERE name = ?");
    q.Text(1, name);
    const int rc = sqlite3_step(q.s);
    if (rc == SQLITE_ROW) return static_cast<int64_t>(sqlite3_column_int64(q.s, 0));
    if (rc == SQLITE_DONE) return int64_t{0};
    return Error("worker_certs");
  }

  StatusOr<bool> ForgetCertificate(const std::string& name) override {
    MutexLock lock(mu_);
    TokenStmt del(db_, "DELETE FROM worker_certs WHERE name = ?");
    del.Text(1, name);
    if (sqlite3_step(del.s) != SQLITE_DONE) return Error("worker_certs");
    return sqlite3_changes(db_) > 0;
  }

 private:
  SqliteTokenBackend(sqlite3* db, const std::string& db_path, int64_t poll_ms)
      : db_(db), poll_ms_(poll_ms), inotify_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    watches_.push_back({db_path, -1});
    watches_.push_back({db_path + "-wal", -1});
  }
  Status Exec(const char* sql) REQUIRES(mu_) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err ? err : "unknown error";
      sqlite3_free(err);
      return Status::Unavailable("tokens: " + why);
    }
    return Status::Ok();
  }
  Status Error(const char* table) REQUIRES(mu_) {
    return Status::Unavailable(std::string(table) + ": " + sqlite3_errmsg(db_));
  }

  struct Watch {
    std::string path;
    int wd;
  };

  Mutex mu_;
  sqlite3* const db_;
  int64_t loaded_version_ GUARDED_BY(mu_) = -1;
  const int64_t poll_ms_;
  const int inotify_;           // -1: unavailable (then the poller only polls)
  std::vector<Watch> watches_;  // the poller's only
};

}  // namespace

StatusOr<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string& db_path,
                                                       int64_t poll_ms) {
  auto backend = SqliteTokenBackend::Open(db_path, poll_ms);
  if (!backend.ok()) return backend.status();
  return Open(std::unique_ptr<TokenBackend>(std::move(*backend)));
}

StatusOr<std::unique_ptr<TokenStore>> TokenStore::Open(std::unique_ptr<TokenBackend> backend) {
  std::unique_ptr<TokenStore> store(new TokenStore(std::move(backend)));
  CONVOY_RETURN_IF_ERROR(store->Reload(true));
  if (store->backend_->poll_ms() > 0) {
    TokenStore* self = store.get();
    store->poller_ = std::thread([self] { self->Poll(); });
  }
  return store;
}

TokenStore::~TokenStore() {
  if (poller_.joinable()) {
    {
      MutexLock lock(poll_mu_);
      stopping_ = true;
    }
    poll_cv_.SignalAll();
    poller_.join();
  }
  Flush();
}

void TokenStore::Poll() {
  SystemClock clock;
  const int64_t interval = backend_->poll_ms();
  int64_t next = clock.NowMonotonicMs() + interval;
  for (;;) {
    // A backend that can tell of a write wakes the poller at once (SQLite); every poll_ms it
    // looks anyway (etcd: only that).
    const std::optional<bool> written = backend_->WaitForWrite(kWakeMs);
    {
      MutexLock lock(poll_mu_);
      if (stopping_) return;
      const int64_t left = next - clock.NowMonotonicMs();
      if (!written.has_value() && left > 0) {
        poll_cv_.WaitFor(poll_mu_, std::chrono::milliseconds(left));
      }
      if (stopping_) return;
    }
    if (written.value_or(false) || clock.NowMonotonicMs() >= next) {
      // Unreachable for now: the table in memory serves until the next look.
      Reload(false).ok();
      next = clock.NowMonotonicMs() + interval;
    }
  }
}

Status TokenStore::Reload(bool force) {
  if (!force) {
    auto changed = backend_->MayHaveChanged();
    if (!changed.ok()) return changed.status();
    if (!*changed) return Status::Ok();
  }
  auto loaded = backend_->LoadAll();
  if (!loaded.ok()) return loaded.status();
  std::map<std::string, TokenRow> rows;
  for (TokenRow& row : *loaded) {
    const std::string id = row.record.id;
    rows.emplace(id, std::move(row));
  }
  MutexLock lock(mu_);
  for (auto& [id, row] : rows) {
    auto used = used_.find(id);
    if (used != used_.end() && used->second > row.record.last_used_ms) {
      row.record.last_used_ms = used->second;
    }
  }
  rows_ = std::move(rows);
  return Status::Ok();
}

StatusOr<std::string> TokenStore::Create(const std::string& user, Role role, int64_t ttl_ms,
                                         int uses, int64_t now_ms, TokenRecord* made,
                                         const std::string& name) {
  TokenRow row;
  row.record.id = RandomHex(8);
  row.record.user = user;
  row.record.role = role;
  row.record.created_ms = now_ms;
  row.record.expires_ms = ttl_ms > 0 ? now_ms + ttl_ms : 0;
  row.record.uses_left = uses > 0 ? uses : -1;
  row.record.name = name;
  const std::string secret = RandomHex(32);
  row.salt = RandomHex(16);
  row.hash = Sha256Hex(row.salt + secret);
  CONVOY_RETURN_IF_ERROR(backend_->Insert(row));
  if (made) *made = row.record;
  const std::string id = row.record.id;
  MutexLock lock(mu_);
  rows_[id] = std::move(row);
  return "cvy_" + id + "." + secret;
}

StatusOr<std::vector<TokenRecord>> TokenStore::List() {
  CONVOY_RETURN_IF_ERROR(Reload(false));
  MutexLock lock(mu_);
  std::vector<TokenRecord> out;
  for (const auto& [id, row] : rows_) out.push_back(row.record);
  std::sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) {
    return a.created_ms != b.created_ms ? a.created_ms > b.created_ms : a.id < b.id;
  });
  return out;
}

StatusOr<int> TokenStore::Revoke(const std::string& id_or_user) {
  std::string id = id_or_user;
  std::string secret;
  if (SplitToken(id_or_user, &id, &secret)) {
    // A whole token pasted: its id part.
  } else if (id.compare(0, 4, "cvy_") == 0) {
    id = id.substr(4);
  }
  auto revoked = backend_->Revoke(id, id_or_user);
  if (!revoked.ok()) return revoked.status();
  {
    MutexLock lock(mu_);
    for (const std::string& rid : *revoked) {
      auto it = rows_.find(rid);
      if (it != rows_.end()) it->second.record.revoked = true;
    }
  }
  if (revoked->empty()) {
    return Status::NotFound("no live token with id or user '" + id_or_user + "'");
  }
  return static_cast<int>(revoked->size());
}

StatusOr<TokenRecord> TokenStore::Check(const std::string& token, int64_t now_ms, bool consume) {
  std::string id, secret;
  if (!SplitToken(token, &id, &secret)) {
    return Status::Unauthenticated("malformed token (expected cvy_<id>.<secret>)");
  }
  bool known = false;
  {
    MutexLock lock(mu_);
    known = rows_.count(id) > 0;
  }
  if (!known) {
    // Made since the last poll (`token create` elsewhere, just now): read again before
    // refusing it, at most once per kMissReloadMs however many unknown tokens come.
    const int64_t now = SystemClock().NowMonotonicMs();
    int64_t last = last_miss_reload_ms_.load();
    if (now - last >= kMissReloadMs && last_miss_reload_ms_.compare_exchange_strong(last, now)) {
      Reload(true).ok();
    }
  }
  TokenRecord record;
  {
    MutexLock lock(mu_);
    auto it = rows_.find(id);
    if (it == rows_.end()) return Status::Unauthenticated("unknown token " + id);
    const TokenRow& row = it->second;
    if (!ConstantTimeEquals(Sha256Hex(row.salt + secret), row.hash)) {
      return Status::Unauthenticated("wrong secret for token " + id);
    }
    record = row.record;
  }
  if (record.revoked) return Status::Unauthenticated("token " + id + " was revoked");
  if (record.expires_ms != 0 && now_ms >= record.expires_ms) {
    return Status::Unauthenticated("token " + id + " expired");
  }
  if (record.uses_left == 0) return Status::Unauthenticated("token " + id + " is used up");
  if (consume && record.uses_left > 0) {
    // In the backend, at once and atomically: another coordinator (or this one, on another
    // thread) may be taking the same last use.
    auto taken = backend_->TakeUse(id);
    if (!taken.ok()) return taken.status();
    MutexLock lock(mu_);
    auto it = rows_.find(id);
    if (!*taken) {
      if (it != rows_.end()) it->second.record.uses_left = 0;
      return Status::Unauthenticated("token " + id + " is used up");
    }
    // At most what was left when this check read it, less this use: the table may have been
    // read again since the take (the poller saw the backend written), and then it counts this
    // use already; decrementing that would count it twice and refuse a use that is left.
    if (it != rows_.end() && it->second.record.uses_left > 0) {
      it->second.record.uses_left = std::min(it->second.record.uses_left, record.uses_left - 1);
    }
    --record.uses_left;
  }
  MutexLock lock(mu_);
  auto it = rows_.find(id);
  if (it != rows_.end()) it->second.record.last_used_ms = now_ms;
  used_[id] = now_ms;
  record.last_used_ms = now_ms;
  return record;
}

bool TokenStore::StillValid(const std::string& id, int64_t now_ms) {
  MutexLock lock(mu_);
  auto it = rows_.find(id);
  if (it == rows_.end()) return false;
  const TokenRecord& r = it->second.record;
  return !r.revoked && (r.expires_ms == 0 || now_ms < r.expires_ms);
}

Status TokenStore::RecordCertificate(const std::string& name, int64_t not_after_s) {
  return backend_->RecordCertificate(name, not_after_s);
}

StatusOr<int64_t> TokenStore::CertificateNotAfter(const std::string& name) {
  return backend_->CertificateNotAfter(name);
}

StatusOr<bool> TokenStore::ForgetCertificate(const std::string& name) {
  return backend_->ForgetCertificate(name);
}

void TokenStore::Flush() {
  std::map<std::string, int64_t> used;
  {
    MutexLock lock(mu_);
    used.swap(used_);
  }
  if (used.empty()) return;
  if (!backend_->WriteLastUsed(used).ok()) {
    MutexLock lock(mu_);
    for (const auto& [id, ms] : used) used_.emplace(id, ms);  // newer ones stay
  }
}

}  // namespace convoy

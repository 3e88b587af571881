#include "coordinator/store/token_store.h"

#include <algorithm>

#include "common/pki.h"

namespace convoy {
namespace {

constexpr const char* kSchema = R"sql(
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

struct Stmt {
  Stmt(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &s, nullptr); }
  ~Stmt() { sqlite3_finalize(s); }
  Stmt& Text(int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Int(int i, int64_t v) {
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

StatusOr<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string& db_path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status::Unavailable(db_path + ": " + why);
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<TokenStore> store(new TokenStore(db));
  MutexLock lock(store->mu_);
  CONVOY_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  CONVOY_RETURN_IF_ERROR(store->Exec(kSchema));
  {
    // A tokens.db made before join tokens could be bound to a name gets the column.
    bool has_name = false;
    Stmt cols(db, "PRAGMA table_info(tokens)");
    while (sqlite3_step(cols.s) == SQLITE_ROW) has_name = has_name || cols.Col(1) == "name";
    if (!has_name) {
      CONVOY_RETURN_IF_ERROR(
          store->Exec("ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT ''"));
    }
  }
  CONVOY_RETURN_IF_ERROR(store->ReloadIfChanged());
  return store;
}

TokenStore::~TokenStore() {
  Flush();
  sqlite3_close(db_);
}

Status TokenStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    return Status::Unavailable("tokens: " + why);
  }
  return Status::Ok();
}

Status TokenStore::ReloadIfChanged() {
  int64_t version = -1;
  {
    Stmt q(db_, "PRAGMA data_version");
    if (sqlite3_step(q.s) == SQLITE_ROW) version = sqlite3_column_int64(q.s, 0);
  }
  if (version == data_version_ && version != -1) return Status::Ok();
  Stmt q(db_,
         "SELECT id, user, role, salt, hash, created_ms, expires_ms, last_used_ms, uses_left, "
         "revoked, name FROM tokens");
  if (q.s == nullptr) return Status::Unavailable(std::string("tokens: ") + sqlite3_errmsg(db_));
  std::map<std::string, Row> rows;
  int rc;
  while ((rc = sqlite3_step(q.s)) == SQLITE_ROW) {
    Row row;
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
    auto used = used_.find(row.record.id);
    if (used != used_.end()) row.record.last_used_ms = used->second;
    rows.emplace(row.record.id, std::move(row));
  }
  if (rc != SQLITE_DONE) return Status::Unavailable(std::string("tokens: ") + sqlite3_errmsg(db_));
  rows_ = std::move(rows);
  data_version_ = version;
  return Status::Ok();
}

StatusOr<std::string> TokenStore::Create(const std::string& user, Role role, int64_t ttl_ms,
                                         int uses, int64_t now_ms, TokenRecord* made,
                                         const std::string& name) {
  Row row;
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
  MutexLock lock(mu_);
  Stmt ins(db_,
           "INSERT INTO tokens (id, user, role, salt, hash, created_ms, expires_ms, uses_left, "
           "name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  ins.Text(1, row.record.id)
      .Text(2, user)
      .Text(3, RoleName(role))
      .Text(4, row.salt)
      .Text(5, row.hash)
      .Int(6, now_ms)
      .Int(7, row.record.expires_ms)
      .Int(8, row.record.uses_left)
      .Text(9, name);
  if (sqlite3_step(ins.s) != SQLITE_DONE) {
    return Status::Unavailable(std::string("tokens: ") + sqlite3_errmsg(db_));
  }
  if (made) *made = row.record;
  const std::string id = row.record.id;
  rows_[id] = std::move(row);
  return "cvy_" + id + "." + secret;
}

StatusOr<std::vector<TokenRecord>> TokenStore::List() {
  MutexLock lock(mu_);
  CONVOY_RETURN_IF_ERROR(ReloadIfChanged());
  std::vector<TokenRecord> out;
  for (const auto& [id, row] : rows_) out.push_back(row.record);
  std::sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) {
    return a.created_ms != b.created_ms ? a.created_ms > b.created_ms : a.id < b.id;
  });
  return out;
}

StatusOr<int> TokenStore::Revoke(const std::string& id_or_user) {
  MutexLock lock(mu_);
  std::string id = id_or_user;
  std::string secret;
  if (SplitToken(id_or_user, &id, &secret)) {
    // A whole token pasted: its id part.
  } else if (id.compare(0, 4, "cvy_") == 0) {
    id = id.substr(4);
  }
  Stmt up(db_, "UPDATE tokens SET revoked = 1 WHERE (id = ? OR user = ?) AND revoked = 0");
  up.Text(1, id).Text(2, id_or_user);
  if (sqlite3_step(up.s) != SQLITE_DONE) {
    return Status::Unavailable(std::string("tokens: ") + sqlite3_errmsg(db_));
  }
  const int n = sqlite3_changes(db_);
  CONVOY_RETURN_IF_ERROR(ReloadIfChanged());
  for (auto& [rid, row] : rows_) {
    if (rid == id || row.record.user == id_or_user) row.record.revoked = true;
  }
  if (n == 0) {
    return Status::NotFound("no live token with id or user '" + id_or_user + "'");
  }
  return n;
}

StatusOr<TokenRecord> TokenStore::Check(const std::string& token, int64_t now_ms, bool consume) {
  std::string id, secret;
  if (!SplitToken(token, &id, &secret)) {
    return Status::Unauthenticated("malformed token (expected cvy_<id>.<secret>)");
  }
  MutexLock lock(mu_);
  CONVOY_RETURN_IF_ERROR(ReloadIfChanged());
  auto it = rows_.find(id);
  if (it == rows_.end()) return Status::Unauthenticated("unknown token " + id);
  Row& row = it->second;
  if (!ConstantTimeEquals(Sha256Hex(row.salt + secret), row.hash)) {
    return Status::Unauthenticated("wrong secret for token " + id);
  }
  if (row.record.revoked) return Status::Unauthenticated("token " + id + " was revoked");
  if (row.record.expires_ms != 0 && now_ms >= row.record.expires_ms) {
    return Status::Unauthenticated("token " + id + " expired");
  }
  if (row.record.uses_left == 0) return Status::Unauthenticated("token " + id + " is used up");
  if (consume && row.record.uses_left > 0) {
    Stmt up(db_, "UPDATE tokens SET uses_left = uses_left - 1 WHERE id = ? AND uses_left > 0");
    up.Text(1, id);
    if (sqlite3_step(up.s) != SQLITE_DONE || sqlite3_changes(db_) != 1) {
      return Status::Unauthenticated("token " + id + " is used up");
    }
    --row.record.uses_left;
  }
  row.record.last_used_ms = now_ms;
  used_[id] = now_ms;
  return row.record;
}

bool TokenStore::StillValid(const std::string& id, int64_t now_ms) {
  MutexLock lock(mu_);
  if (!ReloadIfChanged().ok()) return true;  // unreadable for now: decided on the next look
  auto it = rows_.find(id);
  if (it == rows_.end()) return false;
  const TokenRecord& r = it->second.record;
  return !r.revoked && (r.expires_ms == 0 || now_ms < r.expires_ms);
}

Status TokenStore::RecordCertificate(const std::string& name, int64_t not_after_s) {
  MutexLock lock(mu_);
  Stmt up(db_,
          "INSERT INTO worker_certs (name, not_after_s) VALUES (?, ?) "
          "ON CONFLICT(name) DO UPDATE SET not_after_s = excluded.not_after_s");
  up.Text(1, name).Int(2, not_after_s);
  if (sqlite3_step(up.s) != SQLITE_DONE) {
    return Status::Unavailable(std::string("worker_certs: ") + sqlite3_errmsg(db_));
  }
  return Status::Ok();
}

StatusOr<int64_t> TokenStore::CertificateNotAfter(const std::string& name) {
  MutexLock lock(mu_);
  Stmt q(db_, "SELECT not_after_s FROM worker_certs WHERE name = ?");
  q.Text(1, name);
  const int rc = sqlite3_step(q.s);
  if (rc == SQLITE_ROW) return static_cast<int64_t>(sqlite3_column_int64(q.s, 0));
  if (rc == SQLITE_DONE) return int64_t{0};
  return Status::Unavailable(std::string("worker_certs: ") + sqlite3_errmsg(db_));
}

StatusOr<bool> TokenStore::ForgetCertificate(const std::string& name) {
  MutexLock lock(mu_);
  Stmt del(db_, "DELETE FROM worker_certs WHERE name = ?");
  del.Text(1, name);
  if (sqlite3_step(del.s) != SQLITE_DONE) {
    return Status::Unavailable(std::string("worker_certs: ") + sqlite3_errmsg(db_));
  }
  return sqlite3_changes(db_) > 0;
}

void TokenStore::Flush() {
  MutexLock lock(mu_);
  if (used_.empty()) return;
  if (!Exec("BEGIN").ok()) return;
  for (const auto& [id, ms] : used_) {
    Stmt up(db_, "UPDATE tokens SET last_used_ms = ? WHERE id = ? AND last_used_ms < ?");
    up.Int(1, ms).Text(2, id).Int(3, ms);
    sqlite3_step(up.s);
  }
  if (Exec("COMMIT").ok()) {
    used_.clear();
  } else {
    Exec("ROLLBACK").ok();
  }
}

}  // namespace convoy

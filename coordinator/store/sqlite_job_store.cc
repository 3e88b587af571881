#include "coordinator/store/sqlite_job_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace convoy {
namespace {

// job_metrics and file_deletions were added without a version change: CREATE TABLE IF NOT
// EXISTS adds them to an older file, and an older coordinator ignores them.
constexpr int kSchemaVersion = 1;
// PRAGMA application_id of a Convoy state database ("CNVY").
constexpr int kApplicationId = 0x434e5659;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  state INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  job BLOB NOT NULL            -- v1.Job without events and attempts
);
CREATE TABLE IF NOT EXISTS attempts (
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  body BLOB NOT NULL,          -- v1.Attempt
  PRIMARY KEY (job_id, attempt)
);
CREATE TABLE IF NOT EXISTS events (
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  time_ms INTEGER NOT NULL,
  from_state INTEGER NOT NULL,
  to_state INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  reason TEXT NOT NULL,
  body BLOB NOT NULL,          -- v1.JobEvent
  PRIMARY KEY (job_id, seq)
);
CREATE TABLE IF NOT EXISTS job_metrics (
  job_id TEXT PRIMARY KEY,
  body BLOB NOT NULL           -- v1.JobMetrics, written apart from the job when it changes
);
CREATE TABLE IF NOT EXISTS file_deletions (
  worker TEXT NOT NULL,        -- a worker yet to remove the files of
  job_id TEXT NOT NULL,        -- this deleted job (DeleteJobFiles not yet answered)
  job_uid TEXT NOT NULL DEFAULT '',  -- its uid (added later: see OpenSchema)
  PRIMARY KEY (worker, job_id)
);
CREATE TABLE IF NOT EXISTS workers (
  name TEXT PRIMARY KEY,
  updated_ms INTEGER NOT NULL,
  body BLOB NOT NULL           -- v1.WorkerInfo
);
)sql";

// A prepared statement for one use: either owned (finalized on scope exit) or one of the
// store's cached statements (reset and unbound on scope exit, ready for the next use).
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : owned_(true) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  explicit Stmt(sqlite3_stmt* cached) : stmt_(cached), rc_(cached ? SQLITE_OK : SQLITE_ERROR) {}
  ~Stmt() {
    if (owned_) {
      sqlite3_finalize(stmt_);
    } else if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  void Text(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Blob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Int(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  int Step() { return sqlite3_step(stmt_); }
  std::string ColumnBlob(int i) {
    const void* p = sqlite3_column_blob(stmt_, i);
    return p == nullptr ? std::string()
                        : std::string(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, i));
  }
  std::string ColumnText(int i) {
    const unsigned char* p = sqlite3_column_text(stmt_, i);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_ERROR;
  bool owned_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(const std::string& path) {
  // One coordinator per state file: two would overwrite each other's transitions. The lock
  // (flock on <path>.lock) goes with the process, however it ends.
  const std::string lock_path = path + ".lock";
  int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd < 0) {
    return Status::Unavailable(lock_path + ": cannot open the state lock: " + std::strerror(errno));
  }
  (void)!fchmod(lock_fd, 0600);  // also one made by an older coordinator
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const ssize_t n = pread(lock_fd, holder, sizeof(holder) - 1, 0);
    close(lock_fd);
    return Status::FailedPrecondition(
        path + ": in use by another coordinator" +
        (n > 0 ? " (pid " + std::string(holder, static_cast<size_t>(n)) + ")" : std::string()) +
        "; one state file serves one coordinator");
  }
  const std::string pid = std::to_string(getpid());
  if (ftruncate(lock_fd, 0) != 0 || pwrite(lock_fd, pid.data(), pid.size(), 0) < 0) {
    // Only the message above loses the pid; the lock holds.
  }

  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    close(lock_fd);
    return Status::Unavailable(path + ": cannot open the state database: " + msg);
  }
  // Every spec's environment is in it: 0600 (new files get it from the daemon's umask 077;
  // this fixes files made by an older coordinator).
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string file = path + suffix;
    struct stat st {};
    if (lstat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0077) != 0) {
      chmod(file.c_str(), 0600);
    }
  }
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(db, path, lock_fd));
  sqlite3_busy_timeout(db, 5000);
  // Reading the schema is the first access: a file that is not a database fails here.
  auto pragma = [&](const char* sql, int* out) {
    Stmt s(db, sql);
    if (!s.ok() || s.Step() != SQLITE_ROW) return false;
    *out = sqlite3_column_int(s.get(), 0);
    return true;
  };
  int found = 0, application = 0, tables = 0;
  if (!pragma("PRAGMA user_version", &found) || !pragma("PRAGMA application_id", &application) ||
      !pragma("SELECT count(*) FROM sqlite_master", &tables)) {
    return Status::FailedPrecondition(path + ": not a Convoy state database (" +
                                      sqlite3_errmsg(db) + ")");
  }
  // Another program's database: never add tables to it, let alone rewrite it.
  if ((found == 0 && tables > 0) || (found > 0 && application != kApplicationId)) {
    return Status::FailedPrecondition(path +
                                      ": an SQLite database of another program, not a Convoy "
                                      "state database (application_id " +
                                      std::to_string(application) + ", " + std::to_string(tables) +
                                      " schema objects)");
  }
  if (found > kSchemaVersion) {
    return Status::FailedPrecondition(path + ": written by a newer Convoy (schema " +
                                      std::to_string(found) + ", this one knows " +
                                      std::to_string(kSchemaVersion) + ")");
  }
  CONVOY_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  // FULL: a committed transition survives a power loss, not only a process crash.
  CONVOY_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  CONVOY_RETURN_IF_ERROR(store->Exec(kSchema));
  // file_deletions.job_uid came after the table: added to an older file (an older
  // coordinator names its columns, so it still reads and writes the table).
  if (Stmt probe(db, "SELECT job_uid FROM file_deletions LIMIT 0"); !probe.ok()) {
    CONVOY_RETURN_IF_ERROR(
        store->Exec("ALTER TABLE file_deletions ADD COLUMN job_uid TEXT NOT NULL DEFAULT ''"));
  }
  CONVOY_RETURN_IF_ERROR(
      store->Exec(("PRAGMA application_id=" + std::to_string(kApplicationId)).c_str()));
  CONVOY_RETURN_IF_ERROR(
      store->Exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str()));
  return store;
}

SqliteJobStore::~SqliteJobStore() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
  close(lock_fd_);
}

Status SqliteJobStore::Error(const std::string& what) const {
  return Status::Unavailable(path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

sqlite3_stmt* SqliteJobStore::Cached(const char* sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return nullptr;  // not cached: the caller's error names what failed
  }
  cache_.emplace(sql, stmt);
  return stmt;
}

Status SqliteJobStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : "unknown error";
    sqlite3_free(err);
    return Status::Unavailable(path_ + ": " + msg);
  }
  return Status::Ok();
}

template <typename F>
Status SqliteJobStore::InTransaction(F&& body) {
  CONVOY_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status st = body();
  if (st.ok()) st = Exec("COMMIT");
  if (!st.ok()) Exec("ROLLBACK");
  return st;
}

Status SqliteJobStore::WriteJobBody(const v1::Job& job) {
  v1::Job head = job;
  head.clear_events();
  head.clear_attempts();
  {
    Stmt s(
        Cached("INSERT OR REPLACE INTO jobs(id, name, state, created_ms, updated_ms, job) "
               "VALUES(?, ?, ?, ?, ?, ?)"));
    if (!s.ok()) return Error("prepare jobs");
    s.Text(1, job.id());
    s.Text(2, job.spec().name());
    s.Int(3, job.state());
    s.Int(4, job.created_unix_ms());
    s.Int(5, job.updated_unix_ms());
    s.Blob(6, head.SerializeAsString());
    if (s.Step() != SQLITE_DONE) return Error("write job " + job.id());
  }
  for (const v1::Attempt& a : job.attempts()) {
    Stmt s(Cached("INSERT OR REPLACE INTO attempts(job_id, attempt, body) VALUES(?, ?, ?)"));
    if (!s.ok()) return Error("prepare attempts");
    s.Text(1, job.id());
    s.Int(2, a.attempt());
    s.Blob(3, a.SerializeAsString());
    if (s.Step() != SQLITE_DONE) return Error("write attempt of " + job.id());
  }
  return Status::Ok();
}

Status SqliteJobStore::AppendEvent(const std::string& job_id, const v1::JobEvent& event) {
  Stmt s(
      Cached("INSERT INTO events(job_id, seq, time_ms, from_state, to_state, attempt, reason, "
             "body) VALUES(?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE job_id = ?1), "
             "?2, ?3, ?4, ?5, ?6, ?7)"));
  if (!s.ok()) return Error("prepare events");
  s.Text(1, job_id);
  s.Int(2, event.time_unix_ms());
  s.Int(3, event.from());
  s.Int(4, event.to());
  s.Int(5, event.attempt());
  s.Text(6, event.reason());
  s.Blob(7, event.SerializeAsString());
  if (s.Step() != SQLITE_DONE) return Error("write event of " + job_id);
  return Status::Ok();
}

Status SqliteJobStore::SaveJob(const v1::Job& job, const v1::JobEvent* event) {
  return InTransaction([&]() -> Status {
    CONVOY_RETURN_IF_ERROR(WriteJobBody(job));
    if (event != nullptr) CONVOY_RETURN_IF_ERROR(AppendEvent(job.id(), *event));
    return Status::Ok();
  });
}

Status SqliteJobStore::Write(const std::vector<StoreWrite>& writes) {
  // A job written many times in one batch (every rank exit of a big job) needs only its
  // last body: find it first.
  std::map<std::string, size_t> last_body, last_metrics;
  for (size_t i = 0; i < writes.size(); ++i) {
    if (writes[i].job) last_body[writes[i].job->id()] = i;
    if (writes[i].job_metrics) last_metrics[writes[i].job_metrics->job_id()] = i;
  }
  return InTransaction([&]() -> Status {
    for (size_t i = 0; i < writes.size(); ++i) {
      const StoreWrite& w = writes[i];
      if (w.job) {
        if (last_body[w.job->id()] == i) CONVOY_RETURN_IF_ERROR(WriteJobBody(*w.job));
        if (w.event) CONVOY_RETURN_IF_ERROR(AppendEvent(w.job->id(), *w.event));
      }
      if (w.worker) CONVOY_RETURN_IF_ERROR(WriteWorker(*w.worker));
      if (w.job_metrics && last_metrics[w.job_metrics->job_id()] == i) {
        CONVOY_RETURN_IF_ERROR(WriteJobMetrics(*w.job_metrics));
      }
      if (w.delete_job) CONVOY_RETURN_IF_ERROR(RemoveJob(*w.delete_job));
      if (w.delete_worker) CONVOY_RETURN_IF_ERROR(RemoveWorker(*w.delete_worker));
      if (w.file_deletion) {
        CONVOY_RETURN_IF_ERROR(WriteFileDeletion(*w.file_deletion, w.file_deletion_pending));
      }
    }
    return Status::Ok();
  });
}

StatusOr<std::vector<v1::Job>> SqliteJobStore::LoadJobs() {
  std::vector<v1::Job> jobs;
  std::map<std::string, size_t> index;
  {
    Stmt s(db_, "SELECT id, job FROM jobs ORDER BY id");
    if (!s.ok()) return Error("read jobs");
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      v1::Job job;
      const std::string id = s.ColumnText(0);
      if (!job.ParseFromString(s.ColumnBlob(1)) || job.id() != id) {
        return Status::Internal(path_ + ": table jobs, row " + id + ": corrupt record");
      }
      index[id] = jobs.size();
      jobs.push_back(std::move(job));
    }
    if (rc != SQLITE_DONE) return Error("read jobs");
  }
  {
    Stmt s(db_, "SELECT job_id, attempt, body FROM attempts ORDER BY job_id, attempt");
    if (!s.ok()) return Error("read attempts");
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      const std::string id = s.ColumnText(0);
      v1::Attempt a;
      if (!a.ParseFromString(s.ColumnBlob(2))) {
        return Status::Internal(path_ + ": table attempts, row " + id + "/" +
                                std::to_string(sqlite3_column_int(s.get(), 1)) +
                                ": corrupt record");
      }
      auto it = index.find(id);
      if (it != index.end()) *jobs[it->second].add_attempts() = std::move(a);
    }
    if (rc != SQLITE_DONE) return Error("read attempts");
  }
  {
    Stmt s(db_, "SELECT job_id, seq, body FROM events ORDER BY job_id, seq");
    if (!s.ok()) return Error("read events");
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      const std::string id = s.ColumnText(0);
      v1::JobEvent e;
      if (!e.ParseFromString(s.ColumnBlob(2))) {
        return Status::Internal(path_ + ": table events, row " + id + "/" +
                                std::to_string(sqlite3_column_int(s.get(), 1)) +
                                ": corrupt record");
      }
      auto it = index.find(id);
      if (it != index.end()) *jobs[it->second].add_events() = std::move(e);
    }
    if (rc != SQLITE_DONE) return Error("read events");
  }
  return jobs;
}

Status SqliteJobStore::SaveJobMetrics(const v1::JobMetrics& job_metrics) {
  return InTransaction([&] { return WriteJobMetrics(job_metrics); });
}

Status SqliteJobStore::WriteJobMetrics(const v1::JobMetrics& job_metrics) {
  Stmt s(Cached("INSERT OR REPLACE INTO job_metrics(job_id, body) VALUES(?, ?)"));
  if (!s.ok()) return Error("prepare job_metrics");
  s.Text(1, job_metrics.job_id());
  s.Blob(2, job_metrics.SerializeAsString());
  if (s.Step() != SQLITE_DONE) return Error("write the metric history of " + job_metrics.job_id());
  return Status::Ok();
}

StatusOr<std::vector<v1::JobMetrics>> SqliteJobStore::LoadJobMetrics() {
  std::vector<v1::JobMetrics> out;
  Stmt s(db_, "SELECT job_id, body FROM job_metrics ORDER BY job_id");
  if (!s.ok()) return Error("read job_metrics");
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    v1::JobMetrics m;
    const std::string id = s.ColumnText(0);
    if (!m.ParseFromString(s.ColumnBlob(1)) || m.job_id() != id) {
      return Status::Internal(path_ + ": table job_metrics, row " + id + ": corrupt record");
    }
    out.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE) return Error("read job_metrics");
  return out;
}

Status SqliteJobStore::DeleteJob(const std::string& id) {
  return InTransaction([&] { return RemoveJob(id); });
}

Status SqliteJobStore::RemoveJob(const std::string& id) {
  for (const char* sql :
       {"DELETE FROM events WHERE job_id = ?", "DELETE FROM attempts WHERE job_id = ?",
        "DELETE FROM job_metrics WHERE job_id = ?", "DELETE FROM jobs WHERE id = ?"}) {
    Stmt s(Cached(sql));
    if (!s.ok()) return Error("prepare the deletion of " + id);
    s.Text(1, id);
    if (s.Step() != SQLITE_DONE) return Error("delete job " + id);
  }
  return Status::Ok();
}

Status SqliteJobStore::DeleteWorker(const std::string& name) {
  return InTransaction([&] { return RemoveWorker(name); });
}

Status SqliteJobStore::RemoveWorker(const std::string& name) {
  for (const char* sql :
       {"DELETE FROM file_deletions WHERE worker = ?", "DELETE FROM workers WHERE name = ?"}) {
    Stmt s(Cached(sql));
    if (!s.ok()) return Error("prepare the deletion of worker " + name);
    s.Text(1, name);
    if (s.Step() != SQLITE_DONE) return Error("delete worker " + name);
  }
  return Status::Ok();
}

Status SqliteJobStore::SaveFileDeletion(const FileDeletion& deletion, bool pending) {
  return WriteFileDeletion(deletion, pending);
}

Status SqliteJobStore::WriteFileDeletion(const FileDeletion& deletion, bool pending) {
  Stmt s(Cached(pending ? "INSERT OR REPLACE INTO file_deletions(worker, job_id, job_uid) "
                          "VALUES(?, ?, ?)"
                        : "DELETE FROM file_deletions WHERE worker = ? AND job_id = ?"));
  if (!s.ok()) return Error("prepare file_deletions");
  s.Text(1, deletion.worker);
  s.Text(2, deletion.job_id);
  if (pending) s.Text(3, deletion.job_uid);
  if (s.Step() != SQLITE_DONE) return Error("write the file deletion of " + deletion.job_id);
  return Status::Ok();
}

StatusOr<std::vector<FileDeletion>> SqliteJobStore::LoadFileDeletions() {
  std::vector<FileDeletion> out;
  Stmt s(db_, "SELECT worker, job_id, job_uid FROM file_deletions ORDER BY worker, job_id");
  if (!s.ok()) return Error("read file_deletions");
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back({s.ColumnText(0), s.ColumnText(1), s.ColumnText(2)});
  }
  if (rc != SQLITE_DONE) return Error("read file_deletions");
  return out;
}

Status SqliteJobStore::SaveWorker(const v1::WorkerInfo& worker) { return WriteWorker(worker); }

Status SqliteJobStore::WriteWorker(const v1::WorkerInfo& worker) {
  Stmt s(Cached("INSERT OR REPLACE INTO workers(name, updated_ms, body) VALUES(?, ?, ?)"));
  if (!s.ok()) return Error("prepare workers");
  s.Text(1, worker.name());
  s.Int(2, worker.last_heartbeat_unix_ms());
  s.Blob(3, worker.SerializeAsString());
  if (s.Step() != SQLITE_DONE) return Error("write worker " + worker.name());
  return Status::Ok();
}

StatusOr<std::vector<v1::WorkerInfo>> SqliteJobStore::LoadWorkers() {
  std::vector<v1::WorkerInfo> out;
  Stmt s(db_, "SELECT name, body FROM workers ORDER BY name");
  if (!s.ok()) return Error("read workers");
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    v1::WorkerInfo w;
    if (!w.ParseFromString(s.ColumnBlob(1))) {
      return Status::Internal(path_ + ": table workers, row " + s.ColumnText(0) +
                              ": corrupt record");
    }
    out.push_back(std::move(w));
  }
  if (rc != SQLITE_DONE) return Error("read workers");
  return out;
}

}  // namespace convoy

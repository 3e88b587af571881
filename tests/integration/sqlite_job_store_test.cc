// SqliteJobStore on a real file: round trips, reopening, and a process killed with SIGKILL
// in the middle of a stream of transitions losing nothing it committed.
#include "coordinator/store/sqlite_job_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace convoy {
namespace sqlite_job_store_test {

class SqliteJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("convoy-sqlite-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "convoy.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static v1::Job MakeJob(const std::string& id, v1::JobState state, int attempts) {
    v1::Job job;
    job.set_id(id);
    job.mutable_spec()->set_name("name-" + id);
    job.mutable_spec()->add_command("true");
    job.set_state(state);
    job.set_created_unix_ms(1000);
    for (int i = 0; i < attempts; ++i) {
      v1::Attempt* a = job.add_attempts();
      a->set_attempt(i);
      a->add_nodes()->set_worker("w" + std::to_string(i));
    }
    return job;
  }
  static v1::JobEvent Event(v1::JobState from, v1::JobState to, const std::string& reason) {
    v1::JobEvent e;
    e.set_from(from);
    e.set_to(to);
    e.set_reason(reason);
    return e;
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(SqliteJobStoreTest, RoundTripSurvivesReopen) {
  {
    auto store = SqliteJobStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto e1 = Event(v1::JOB_STATE_UNSPECIFIED, v1::PENDING, "submitted");
    ASSERT_TRUE((*store)->SaveJob(MakeJob("j-000001", v1::PENDING, 0), &e1).ok());
    auto e2 = Event(v1::PENDING, v1::SCHEDULED, "placed");
    ASSERT_TRUE((*store)->SaveJob(MakeJob("j-000001", v1::SCHEDULED, 1), &e2).ok());
    v1::Job with_uid = MakeJob("j-000001", v1::SCHEDULED, 2);
    with_uid.set_uid("0123456789abcdef0123456789abcdef");  // stored with the job's body
    ASSERT_TRUE((*store)->SaveJob(with_uid, nullptr).ok());
    auto e3 = Event(v1::JOB_STATE_UNSPECIFIED, v1::PENDING, "submitted");
    ASSERT_TRUE((*store)->SaveJob(MakeJob("j-000002", v1::PENDING, 0), &e3).ok());
    v1::WorkerInfo w;
    w.set_name("w1");
    w.set_slots(4);
    ASSERT_TRUE((*store)->SaveWorker(w).ok());
    w.set_slots(8);
    ASSERT_TRUE((*store)->SaveWorker(w).ok());
  }
  auto store = SqliteJobStore::Open(path_);
  ASSERT_TRUE(store.ok());
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  const v1::Job& j1 = (*jobs)[0];
  EXPECT_EQ(j1.id(), "j-000001");
  EXPECT_EQ(j1.state(), v1::SCHEDULED);
  EXPECT_EQ(j1.uid(), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ((*jobs)[1].uid(), "");  // none given: the JobManager gives one at load
  ASSERT_EQ(j1.attempts_size(), 2);
  EXPECT_EQ(j1.attempts(1).nodes(0).worker(), "w1");
  ASSERT_EQ(j1.events_size(), 2);
  EXPECT_EQ(j1.events(0).reason(), "submitted");
  EXPECT_EQ(j1.events(1).reason(), "placed");
  EXPECT_EQ((*jobs)[1].events_size(), 1);
  auto workers = (*store)->LoadWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].slots(), 8);
}

TEST_F(SqliteJobStoreTest, AForgottenWorkerLeavesWithItsPendingFileDeletions) {
  {
    auto store = SqliteJobStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    for (const char* name : {"w1", "w2", "w3"}) {
      v1::WorkerInfo w;
      w.set_name(name);
      ASSERT_TRUE((*store)->SaveWorker(w).ok());
      ASSERT_TRUE((*store)->SaveFileDeletion({name, "j-000001", ""}, true).ok());
    }
    ASSERT_TRUE((*store)->DeleteWorker("w2").ok());
    ASSERT_TRUE((*store)->DeleteWorker("nobody").ok());  // not stored: no error
    // In a batch, as the coordinator's commit thread writes it.
    StoreWrite forget;
    forget.delete_worker = "w3";
    ASSERT_TRUE((*store)->Write({forget}).ok());
  }
  auto store = SqliteJobStore::Open(path_);
  ASSERT_TRUE(store.ok());
  auto workers = (*store)->LoadWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].name(), "w1");
  auto deletions = (*store)->LoadFileDeletions();
  ASSERT_TRUE(deletions.ok());
  ASSERT_EQ(deletions->size(), 1u);
  EXPECT_EQ((*deletions)[0].worker, "w1");
}

// Runs `sql` on the file with the plain SQLite API (another program, or a damaged row).
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// A pending file deletion keeps the job's uid (which names its directories on the worker),
// and a file written before the column existed gets it, its rows with an empty uid.
TEST_F(SqliteJobStoreTest, PendingFileDeletionsKeepTheJobUidAndOlderFilesGetTheColumn) {
  const std::string uid = "0123456789abcdef0123456789abcdef";
  {
    auto store = SqliteJobStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    ASSERT_TRUE((*store)->SaveFileDeletion({"w1", "j-000001", uid}, true).ok());
  }
  // As an older coordinator left it: the table without the column, one row.
  RawExec(path_,
          "DROP TABLE file_deletions; CREATE TABLE file_deletions (worker TEXT NOT NULL, "
          "job_id TEXT NOT NULL, PRIMARY KEY (worker, job_id)); INSERT INTO file_deletions "
          "VALUES('w1', 'j-000001');");
  {
    auto store = SqliteJobStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto old = (*store)->LoadFileDeletions();
    ASSERT_TRUE(old.ok()) << old.status().message();
    ASSERT_EQ(old->size(), 1u);
    EXPECT_EQ((*old)[0].job_uid, "");
    ASSERT_TRUE((*store)->SaveFileDeletion({"w2", "j-000002", uid}, true).ok());
  }
  auto store = SqliteJobStore::Open(path_);
  ASSERT_TRUE(store.ok());
  auto deletions = (*store)->LoadFileDeletions();
  ASSERT_TRUE(deletions.ok());
  ASSERT_EQ(deletions->size(), 2u);
  EXPECT_EQ((*deletions)[1].worker, "w2");
  EXPECT_EQ((*deletions)[1].job_uid, uid);
}

TEST_F(SqliteJobStoreTest, AnotherProgramsDatabaseIsRefusedAndLeftAlone) {
  RawExec(path_,
          "CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL);"
          "INSERT INTO invoices VALUES(1, 9.5);");
  auto store = SqliteJobStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(path_), std::string::npos) << store.status().message();
  EXPECT_NE(store.status().message().find("another program"), std::string::npos)
      << store.status().message();
  // Untouched: no Convoy table was added to it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE name = 'jobs'", -1,
                               &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_F(SqliteJobStoreTest, ASecondCoordinatorOnTheSameFileIsRefused) {
  auto first = SqliteJobStore::Open(path_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = SqliteJobStore::Open(path_);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use by another coordinator (pid " +
                                           std::to_string(getpid()) + ")"),
            std::string::npos)
      << second.status().message();
  // Free again once the first is closed.
  first = Status::Unavailable("closed");
  EXPECT_TRUE(SqliteJobStore::Open(path_).ok());
}

TEST_F(SqliteJobStoreTest, ACorruptRecordIsAnErrorNamingTableAndRow) {
  {
    auto store = SqliteJobStore::Open(path_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->SaveJob(MakeJob("j-1", v1::RUNNING, 1), nullptr).ok());
  }
  RawExec(path_, "UPDATE jobs SET job = x'ffffffff0102' WHERE id = 'j-1'");
  auto store = SqliteJobStore::Open(path_);
  ASSERT_TRUE(store.ok());
  auto jobs = (*store)->LoadJobs();
  ASSERT_FALSE(jobs.ok());
  EXPECT_NE(jobs.status().message().find("table jobs, row j-1: corrupt record"), std::string::npos)
      << jobs.status().message();
}

TEST_F(SqliteJobStoreTest, NotADatabaseIsRefusedByPath) {
  {
    std::ofstream out(path_);
    out << "this is not an SQLite database, just some text that is long enough to matter\n";
  }
  auto store = SqliteJobStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(path_), std::string::npos) << store.status().message();
}

TEST_F(SqliteJobStoreTest, KillNineLosesNothingCommitted) {
  // The child writes transitions as fast as it can and reports each commit on a pipe; the
  // parent kills it mid-stream with SIGKILL and then checks every reported commit is there.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    auto store = SqliteJobStore::Open(path_);
    if (!store.ok()) _exit(2);
    for (int i = 0;; ++i) {
      v1::Job job = MakeJob("j-000001", v1::RUNNING, 1);
      job.set_updated_unix_ms(i);
      auto e = Event(v1::RUNNING, v1::RUNNING, "event " + std::to_string(i));
      if (!(*store)->SaveJob(job, &e).ok()) _exit(3);
      if (write(fds[1], &i, sizeof(i)) != sizeof(i)) _exit(4);
    }
  }
  close(fds[1]);
  int last = -1, n = 0;
  while (n < 40 && read(fds[0], &last, sizeof(last)) == sizeof(last)) ++n;
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  while (read(fds[0], &last, sizeof(last)) == sizeof(last)) {
  }
  close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_GE(last, 39);

  auto store = SqliteJobStore::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  const v1::Job& job = (*jobs)[0];
  // Every commit the child reported is there, in order, with no gap and nothing torn.
  ASSERT_GE(job.events_size(), last + 1);
  for (int i = 0; i < job.events_size(); ++i) {
    EXPECT_EQ(job.events(i).reason(), "event " + std::to_string(i));
  }
  EXPECT_GE(job.updated_unix_ms(), last);
  EXPECT_EQ(job.updated_unix_ms(), job.events_size() - 1);
}

}  // namespace sqlite_job_store_test
}  // namespace convoy

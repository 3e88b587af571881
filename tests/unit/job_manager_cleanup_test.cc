// JobManager's deletion of finished jobs and its retention, with a fake clock, the in-memory
// store and a fake worker channel: rows out of the store and memory, DeleteJobFiles to every
// worker that ran the job (at once, or when it registers again), asked again until answered
// without error, and all of it surviving a coordinator restart.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "coordinator/control/job_manager.h"
#include "tests/support/job_manager_fixture.h"

namespace convoy {
namespace job_manager_cleanup_test {

constexpr int64_t kDay = 86'400'000;

class JobCleanupTest : public ::testing::Test {
 protected:
  void SetUp() override { Restart(); }
  void Restart() {
    registry_ = std::make_unique<WorkerRegistry>(clock_, 10 * kDay);
    jm_ = std::make_unique<JobManager>(clock_, store_, *registry_, channel_, options_);
    ASSERT_TRUE(jm_->Recover().ok());
  }
  void Register(const std::string& name) {
    channel_.connected.insert(name);
    v1::Register reg;
    reg.set_name(name);
    reg.set_address("10.0.0.1");
    reg.set_slots(1);
    jm_->OnRegister(reg);
    jm_->Tick();
  }
  // A job of one process on one node.
  static v1::JobSpec OneProcess() {
    v1::JobSpec spec;
    spec.set_name("job");
    spec.set_nodes(1);
    spec.set_procs_per_node(1);
    spec.add_command("true");
    return spec;
  }
  // Submits a 1-node job and, when a worker is free, runs it to SUCCEEDED on it.
  std::string RunToSuccess() {
    auto id = jm_->Submit(OneProcess());
    EXPECT_TRUE(id.ok());
    std::string worker;
    for (auto& [w, m] : channel_.sent) {
      if (m.has_reserve_port() && m.reserve_port().job_id() == *id) worker = w;
    }
    EXPECT_FALSE(worker.empty());
    v1::WorkerMessage port;
    port.mutable_port_reserved()->set_job_id(*id);
    port.mutable_port_reserved()->set_port(40000);
    jm_->OnWorkerMessage(worker, port);
    v1::WorkerMessage started;
    started.mutable_process_started()->set_job_id(*id);
    started.mutable_process_started()->set_pid(7);
    jm_->OnWorkerMessage(worker, started);
    v1::WorkerMessage exited;
    exited.mutable_process_exited()->set_job_id(*id);
    jm_->OnWorkerMessage(worker, exited);
    jm_->Tick();
    channel_.sent.clear();
    EXPECT_EQ(jm_->Get(*id)->state(), v1::SUCCEEDED);
    return *id;
  }
  void Answer(const std::string& worker, const std::string& id, const std::string& error) {
    v1::WorkerMessage msg;
    msg.mutable_job_files_deleted()->set_job_id(id);
    msg.mutable_job_files_deleted()->set_error(error);
    jm_->OnWorkerMessage(worker, msg);
  }
  bool Stored(const std::string& id) {
    auto jobs = store_.LoadJobs();
    if (!jobs.ok()) return false;
    const std::vector<v1::Job> all = std::move(*jobs);
    for (const v1::Job& j : all) {
      if (j.id() == id) return true;
    }
    return false;
  }

  FakeClock clock_;
  MemoryJobStore store_;
  FakeWorkerChannel channel_;
  JobManagerOptions options_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<JobManager> jm_;
};

TEST_F(JobCleanupTest, OnlyFinishedJobsAreDeletedAndTheirWorkersToldToRemoveFiles) {
  Register("w1");
  const std::string done = RunToSuccess();
  v1::JobSpec spec;
  spec.set_name("waits");
  spec.set_nodes(2);  // never fits on one worker: stays PENDING
  spec.set_procs_per_node(1);
  spec.add_command("true");
  const std::string pending = *jm_->Submit(spec);

  auto refused = jm_->Delete(pending);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("cancel it first"), std::string::npos);
  EXPECT_EQ(jm_->Delete("j-999999").status().code(), StatusCode::kNotFound);

  auto workers = jm_->Delete(done);
  ASSERT_TRUE(workers.ok()) << workers.status().message();
  EXPECT_EQ(*workers, std::vector<std::string>{"w1"});
  EXPECT_EQ(channel_.TakeDeletions("w1"), std::vector<std::string>{done});
  EXPECT_FALSE(Stored(done));
  EXPECT_EQ(jm_->Get(done).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(jm_->GetMetrics(done).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(jm_->GetStats().jobs.count(v1::SUCCEEDED), 0u);
  EXPECT_EQ(jm_->List().size(), 1u);
  // Pending until the worker confirms; an error keeps it and asks again later.
  EXPECT_EQ(store_.LoadFileDeletions()->size(), 1u);
  Answer("w1", done, "still running: attempt-0");
  clock_.AdvanceMs(FileDeletions::kRetryMs - 1000);
  jm_->Tick();
  EXPECT_TRUE(channel_.TakeDeletions("w1").empty());
  clock_.AdvanceMs(2000);
  jm_->Tick();
  EXPECT_EQ(channel_.TakeDeletions("w1"), std::vector<std::string>{done});
  Answer("w1", done, "");
  EXPECT_TRUE(store_.LoadFileDeletions()->empty());
  EXPECT_TRUE(jm_->PendingFileDeletions().empty());
}

TEST_F(JobCleanupTest, AnOfflineWorkerIsToldWhenItRegistersEvenAfterACoordinatorRestart) {
  Register("w1");
  const std::string id = RunToSuccess();
  channel_.connected.erase("w1");
  jm_->OnDisconnect("w1");
  ASSERT_TRUE(jm_->Delete(id).ok());
  Restart();  // the pending removal is in the store
  ASSERT_EQ(jm_->PendingFileDeletions().size(), 1u);
  EXPECT_EQ(jm_->PendingFileDeletions()[0].worker, "w1");
  Register("w1");
  EXPECT_EQ(channel_.TakeDeletions("w1"), std::vector<std::string>{id});
  Answer("w1", id, "");
  Restart();
  EXPECT_TRUE(jm_->PendingFileDeletions().empty());
  // Another worker's answer for it changes nothing.
  Register("w2");
  Answer("w2", id, "");
  EXPECT_TRUE(jm_->PendingFileDeletions().empty());
}

TEST_F(JobCleanupTest, RetentionByAgeDeletesFinishedJobsOnly) {
  options_.job_retention_ms = 30 * kDay;
  Restart();
  Register("w1");
  const std::string old_job = RunToSuccess();
  clock_.AdvanceMs(20 * kDay);
  const std::string newer = RunToSuccess();
  v1::JobSpec spec;
  spec.set_name("waits");
  spec.set_nodes(2);
  spec.set_procs_per_node(1);
  spec.add_command("true");
  const std::string pending = *jm_->Submit(spec);
  clock_.AdvanceMs(11 * kDay);  // old_job ended 31 days ago, newer 11
  jm_->Tick();
  EXPECT_EQ(jm_->Get(old_job).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(Stored(old_job));
  EXPECT_EQ(channel_.TakeDeletions("w1"), std::vector<std::string>{old_job});
  EXPECT_TRUE(jm_->Get(newer).ok());
  clock_.AdvanceMs(60 * kDay);
  jm_->Tick();
  EXPECT_EQ(jm_->Get(newer).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(jm_->Get(pending).ok()) << "an unfinished job is never expired";
}

TEST_F(JobCleanupTest, RetentionByCountKeepsTheNewestFinished) {
  options_.job_retention_count = 2;
  Restart();
  Register("w1");
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(RunToSuccess());
    clock_.AdvanceMs(1000);
  }
  clock_.AdvanceMs(Retention::kIntervalMs);
  jm_->Tick();
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(jm_->Get(ids[i]).ok()) << ids[i];
  for (int i = 3; i < 5; ++i) EXPECT_TRUE(jm_->Get(ids[i]).ok()) << ids[i];
}

TEST_F(JobCleanupTest, RetentionDeletesInBatches) {
  options_.job_retention_count = 1;
  Restart();
  Register("w1");
  const size_t n = Retention::kBatch + 5;
  for (size_t i = 0; i < n; ++i) RunToSuccess();
  clock_.AdvanceMs(Retention::kIntervalMs);
  jm_->Tick();
  EXPECT_EQ(jm_->List().size(), n - Retention::kBatch);
  jm_->Tick();  // the rest at the next tick, without waiting for the interval
  EXPECT_EQ(jm_->List().size(), 1u);
}

// What a worker says of an attempt is this job's only when it names the job's uid: a report
// of another job with the same id (it ran there for another cluster, or for this one before
// a fresh state directory) changes nothing, and the coordinator's own messages name the uid.
TEST_F(JobCleanupTest, AWorkersReportOfAnotherJobWithTheSameIdIsIgnored) {
  Register("w1");
  auto id = jm_->Submit(OneProcess());
  ASSERT_TRUE(id.ok());
  const std::string uid = jm_->Get(*id)->uid();
  ASSERT_EQ(uid.size(), 32u);
  const std::string other(32, 'f');
  int reserves = 0;
  for (auto& [w, m] : channel_.sent) {
    if (!m.has_reserve_port()) continue;
    ++reserves;
    EXPECT_EQ(m.reserve_port().job_uid(), uid);
  }
  ASSERT_EQ(reserves, 1);
  auto launches = [&]() {
    int n = 0;
    for (auto& [w, m] : channel_.sent) n += m.has_launch() ? 1 : 0;
    return n;
  };
  auto report = [&](const std::string& job_uid, auto set) {
    v1::WorkerMessage msg;
    set(msg);
    if (msg.has_port_reserved()) msg.mutable_port_reserved()->set_job_uid(job_uid);
    if (msg.has_process_started()) msg.mutable_process_started()->set_job_uid(job_uid);
    if (msg.has_process_exited()) msg.mutable_process_exited()->set_job_uid(job_uid);
    if (msg.has_launch_failed()) msg.mutable_launch_failed()->set_job_uid(job_uid);
    jm_->OnWorkerMessage("w1", msg);
    jm_->Tick();
  };
  auto port = [&](v1::WorkerMessage& m) {
    m.mutable_port_reserved()->set_job_id(*id);
    m.mutable_port_reserved()->set_port(40000);
  };
  report(other, port);
  EXPECT_EQ(launches(), 0);
  EXPECT_EQ(jm_->Get(*id)->state(), v1::RENDEZVOUS);
  report(uid, port);
  EXPECT_EQ(launches(), 1);
  auto started = [&](v1::WorkerMessage& m) {
    m.mutable_process_started()->set_job_id(*id);
    m.mutable_process_started()->set_pid(7);
  };
  report(uid, started);
  ASSERT_EQ(jm_->Get(*id)->state(), v1::RUNNING);
  // Another job's failure and launch failure: this one keeps running.
  report(other, [&](v1::WorkerMessage& m) {
    m.mutable_process_exited()->set_job_id(*id);
    m.mutable_process_exited()->mutable_exit()->set_exit_code(1);
  });
  report(other, [&](v1::WorkerMessage& m) {
    m.mutable_launch_failed()->set_job_id(*id);
    m.mutable_launch_failed()->set_error("no such file");
  });
  EXPECT_EQ(jm_->Get(*id)->state(), v1::RUNNING);
  // Its Kill names its uid.
  channel_.sent.clear();
  ASSERT_TRUE(jm_->Cancel(*id, "").ok());
  int kills = 0;
  for (auto& [w, m] : channel_.sent) {
    if (!m.has_kill()) continue;
    ++kills;
    EXPECT_EQ(m.kill().job_uid(), uid);
  }
  EXPECT_EQ(kills, 1);
}

TEST_F(JobCleanupTest, EachJobHoldsAnIdentityUntilItsFilesAreDeleted) {
  Register("w1");
  const std::string a = RunToSuccess();
  const std::string b = RunToSuccess();
  EXPECT_EQ(jm_->Get(a)->identity(), 1);
  EXPECT_EQ(jm_->Get(b)->identity(), 2);
  // Deleted, a's number stays held until its worker has removed its files (a job given it
  // meanwhile would own those files on that worker).
  ASSERT_TRUE(jm_->Delete(a).ok());
  const std::string c = RunToSuccess();
  EXPECT_EQ(jm_->Get(c)->identity(), 3);
  Answer("w1", a, "");
  const std::string d = RunToSuccess();
  EXPECT_EQ(jm_->Get(d)->identity(), 1);  // the lowest free again
  // The numbers survive a restart, and the Launch carries them.
  Restart();
  EXPECT_EQ(jm_->Get(b)->identity(), 2);
  EXPECT_EQ(jm_->Get(d)->identity(), 1);
  v1::JobSpec spec;
  spec.set_name("next");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("true");
  Register("w1");
  const std::string e = *jm_->Submit(spec);
  EXPECT_EQ(jm_->Get(e)->identity(), 4);
  for (auto& [w, m] : channel_.sent) {
    if (m.has_reserve_port()) {
      v1::WorkerMessage port;
      port.mutable_port_reserved()->set_job_id(e);
      port.mutable_port_reserved()->set_port(40001);
      jm_->OnWorkerMessage(w, port);
      break;
    }
  }
  bool launched = false;
  for (auto& [w, m] : channel_.sent) {
    if (m.has_launch() && m.launch().job_id() == e) {
      EXPECT_EQ(m.launch().identity(), 4);
      launched = true;
    }
  }
  EXPECT_TRUE(launched);
}

// Issue 28: the code archives the coordinator may not collect are those its kept jobs name,
// finished ones included; once a job is deleted, its archive is no longer held by it.
TEST_F(JobCleanupTest, ReferencedCodeIsWhatKeptJobsName) {
  Register("w1");
  const std::string sha_a(64, 'a'), sha_b(64, 'b');
  v1::JobSpec a = OneProcess();
  a.set_code_sha256(sha_a);
  v1::JobSpec b = OneProcess();
  b.set_nodes(2);  // stays PENDING
  b.set_code_sha256(sha_b);
  auto ida = jm_->Submit(a);
  ASSERT_TRUE(ida.ok()) << ida.status().message();
  auto idb = jm_->Submit(b);
  ASSERT_TRUE(idb.ok()) << idb.status().message();
  EXPECT_EQ(jm_->ReferencedCode(), (std::set<std::string>{sha_a, sha_b}));
  ASSERT_TRUE(jm_->Cancel(*idb, "").ok());
  EXPECT_EQ(jm_->ReferencedCode(), (std::set<std::string>{sha_a, sha_b}));  // still kept
  ASSERT_TRUE(jm_->Delete(*idb).ok());
  EXPECT_EQ(jm_->ReferencedCode(), std::set<std::string>{sha_a});
}

}  // namespace job_manager_cleanup_test
}  // namespace convoy

// JobManager::ForgetWorker (`convoy worker forget`, issue 32) with a fake clock, the in-memory
// store and a fake worker channel: only a LOST worker goes, out of the registry and the store
// (so also after a restart), with its pending file removals; the jobs it ran go on; the name
// registering again is a new worker.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "coordinator/control/job_manager.h"
#include "tests/support/job_manager_fixture.h"

namespace convoy {
namespace job_manager_forget_test {

using JobManagerForgetTest = JobManagerFixture;

std::vector<std::string> Names(const std::vector<v1::WorkerInfo>& workers) {
  std::vector<std::string> out;
  for (const v1::WorkerInfo& w : workers) out.push_back(w.name());
  return out;
}

TEST_F(JobManagerForgetTest, OnlyALostWorkerIsForgottenForGoodAndItsJobsGoOn) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  // A job that ran on w2 and is deleted while w2 is away: a file removal pending for w2.
  const std::string done = Submit(2, 1);
  for (const auto& [worker, launch] : StartAttempt(done))
    Exit(worker, done, 0, launch.group_rank(), 0);
  ASSERT_EQ(Job(done).state(), v1::SUCCEEDED);
  const std::string id = Submit(2, 1, 1);
  int w1_rank = -1;
  for (const auto& [worker, launch] : StartAttempt(id)) {
    if (worker == "w1") w1_rank = launch.group_rank();
  }
  ASSERT_GE(w1_rank, 0);
  ASSERT_TRUE(jm_->SetDrained("w2", true, "root").ok());

  EXPECT_EQ(jm_->ForgetWorker("w9", "root").status().code(), StatusCode::kNotFound);
  auto refused = jm_->ForgetWorker("w2", "root");
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("worker w2 is connected"), std::string::npos)
      << refused.status().message();

  // Its stream broke: UNREACHABLE, it may come back.
  KillWorker("w2");
  Advance(1000);
  refused = jm_->ForgetWorker("w2", "root");
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("UNREACHABLE"), std::string::npos)
      << refused.status().message();

  // LOST: its rank was failed, the job restarts (w1's rank still being stopped).
  Advance(10000);
  ASSERT_EQ(registry_->Find("w2")->state(), v1::WORKER_LOST);
  EXPECT_TRUE(WentThrough(Job(id), v1::RESTARTING));
  EXPECT_EQ(Job(id).state(), v1::PENDING);  // waits for a second worker to restart
  ASSERT_TRUE(jm_->Delete(done).ok());
  // A LOST worker whose stream is open again (the caller knows) is connected.
  refused = jm_->ForgetWorker("w2", "root", true);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("worker w2 is connected"), std::string::npos);
  // Not written: not forgotten.
  store_.FailNextWrite();
  EXPECT_FALSE(jm_->ForgetWorker("w2", "root").ok());
  EXPECT_EQ(Names(jm_->ListWorkers()), (std::vector<std::string>{"w1", "w2"}));

  auto forgotten = jm_->ForgetWorker("w2", "root");
  ASSERT_TRUE(forgotten.ok()) << forgotten.status().message();
  EXPECT_EQ(forgotten->worker.name(), "w2");
  EXPECT_EQ(forgotten->worker.state(), v1::WORKER_LOST);
  EXPECT_EQ(forgotten->abandoned_file_deletions, std::vector<std::string>{done});
  EXPECT_EQ(Names(jm_->ListWorkers()), std::vector<std::string>{"w1"});
  EXPECT_EQ(Names(*store_.LoadWorkers()), std::vector<std::string>{"w1"});
  EXPECT_EQ(jm_->GetStats().workers.count(v1::WORKER_LOST), 0u);
  const std::vector<FileDeletion> stored = std::move(*store_.LoadFileDeletions());
  EXPECT_FALSE(stored.empty());  // w1's, not yet answered
  for (const FileDeletion& d : stored) EXPECT_NE(d.worker, "w2");
  for (const FileDeletion& d : jm_->PendingFileDeletions()) EXPECT_NE(d.worker, "w2");
  EXPECT_EQ(jm_->ForgetWorker("w2", "root").status().code(), StatusCode::kNotFound);

  // The job goes on: w1's rank stops, it waits, and a new worker takes w2's place.
  Exit("w1", id, 0, w1_rank, 0, 15, true);
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  AddWorker("w3", 1);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::RENDEZVOUS);
  ASSERT_EQ(job.attempts_size(), 2);
  EXPECT_EQ(job.attempts(1).nodes(0).worker(), "w1");
  EXPECT_EQ(job.attempts(1).nodes(1).worker(), "w3");

  // Gone after a coordinator restart too.
  Restart();
  EXPECT_EQ(Names(jm_->ListWorkers()), (std::vector<std::string>{"w1", "w3"}));
  EXPECT_EQ(jm_->ForgetWorker("w2", "root").status().code(), StatusCode::kNotFound);
  for (const FileDeletion& d : jm_->PendingFileDeletions()) EXPECT_NE(d.worker, "w2");

  // The name registering again is a new worker: READY, not drained, asked for nothing.
  AddWorker("w2", 1);
  const v1::WorkerInfo* again = registry_->Find("w2");
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->state(), v1::WORKER_READY);
  EXPECT_FALSE(again->drained());
  EXPECT_TRUE(channel_.TakeDeletions("w2").empty());
}

TEST_F(JobManagerForgetTest, ForgettingTheLastWorkerThatHeldADeletedJobsFilesFreesItsIdentity) {
  AddWorker("w1", 1);
  const std::string done = Submit(1, 1);
  for (const auto& [worker, launch] : StartAttempt(done))
    Exit(worker, done, 0, launch.group_rank(), 0);
  ASSERT_EQ(Job(done).state(), v1::SUCCEEDED);
  const int32_t identity = Job(done).identity();
  KillWorker("w1");
  Advance(20000);
  ASSERT_EQ(registry_->Find("w1")->state(), v1::WORKER_LOST);
  ASSERT_TRUE(jm_->Delete(done).ok());
  // w1 still holds its files: the identity is not given to another job.
  const std::string other = Submit(1, 1);
  EXPECT_NE(Job(other).identity(), identity);
  ASSERT_TRUE(jm_->Cancel(other, "").ok());
  // Forgotten, w1 will never remove them: nothing holds the identity now.
  ASSERT_TRUE(jm_->ForgetWorker("w1", "root").ok());
  EXPECT_EQ(Job(Submit(1, 1)).identity(), identity);
}

}  // namespace job_manager_forget_test
}  // namespace convoy

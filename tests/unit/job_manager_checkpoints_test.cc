// Checkpoints kept by policy on the coordinator (coordinator/control/checkpoint_book.h): what
// workers report (CheckpointsKept) becomes Job.checkpoints, per worker, newest first, kept
// across a coordinator restart; `resume_from` with `resume_checkpoint: best` starts from the
// best of them, and is refused, naming the field, when there is none.
#include "coordinator/control/checkpoint_book.h"

#include <gtest/gtest.h>

#include "tests/support/job_manager_fixture.h"

namespace convoy {
namespace job_manager_checkpoints_test {

v1::CheckpointInfo Info(const std::string& path, int64_t step, std::optional<double> accuracy) {
  v1::CheckpointInfo c;
  c.set_path(path);
  c.set_step(step);
  c.set_saved_unix_ms(1000 + step);
  if (accuracy) (*c.mutable_metrics())["test_accuracy"] = *accuracy;
  c.add_kept_as("last");
  return c;
}

v1::WorkerMessage Kept(const std::string& job, const std::string& uid,
                       const std::vector<v1::CheckpointInfo>& list) {
  v1::WorkerMessage msg;
  msg.mutable_checkpoints_kept()->set_job_id(job);
  msg.mutable_checkpoints_kept()->set_job_uid(uid);
  for (const auto& c : list) *msg.mutable_checkpoints_kept()->add_checkpoints() = c;
  return msg;
}

TEST(CheckpointBookTest, EachWorkersReportReplacesItsOwnAndTheListIsNewestFirst) {
  v1::Job job;
  ASSERT_TRUE(MergeCheckpointsKept(
      &job, "w1", Kept("j", "", {Info("a", 100, 0.5), Info("b", 300, 0.7)}).checkpoints_kept()));
  ASSERT_TRUE(
      MergeCheckpointsKept(&job, "w2", Kept("j", "", {Info("c", 200, 0.9)}).checkpoints_kept()));
  ASSERT_EQ(job.checkpoints_size(), 3);
  EXPECT_EQ(job.checkpoints(0).path(), "b");
  EXPECT_EQ(job.checkpoints(1).path(), "c");
  EXPECT_EQ(job.checkpoints(1).worker(), "w2");
  EXPECT_EQ(job.checkpoints(2).path(), "a");
  // The same again changes nothing; w1's new list replaces its old one only.
  EXPECT_FALSE(
      MergeCheckpointsKept(&job, "w2", Kept("j", "", {Info("c", 200, 0.9)}).checkpoints_kept()));
  ASSERT_TRUE(
      MergeCheckpointsKept(&job, "w1", Kept("j", "", {Info("d", 400, 0.1)}).checkpoints_kept()));
  ASSERT_EQ(job.checkpoints_size(), 2);
  EXPECT_EQ(job.checkpoints(0).path(), "d");
  EXPECT_EQ(job.checkpoints(0).worker(), "w1");
  EXPECT_EQ(job.checkpoints(1).path(), "c");
}

class JobManagerCheckpointsTest : public JobManagerFixture {
 protected:
  v1::JobSpec Spec() {
    v1::JobSpec spec;
    spec.set_name("ckpt");
    spec.set_nodes(1);
    spec.set_procs_per_node(1);
    spec.add_command("train");
    spec.mutable_checkpoint()->set_keep_last(2);
    spec.mutable_checkpoint()->mutable_keep_best()->set_metric("test_accuracy");
    spec.mutable_checkpoint()->mutable_keep_best()->set_goal("max");
    spec.mutable_checkpoint()->mutable_keep_best()->set_count(1);
    return spec;
  }
};

TEST_F(JobManagerCheckpointsTest, KeptListSurvivesARestartAndResumeBestPicksTheBest) {
  AddWorker("w1", 1);
  const std::string job = SubmitSpec(Spec());
  ASSERT_EQ(StartAttempt(job).size(), 1u);
  const std::string uid = Job(job).uid();
  // Another job's report with this id (another cluster's uid) is not this job's.
  jm_->OnWorkerMessage("w1", Kept(job, "ffffffffffffffffffffffffffffffff", {Info("x", 1, 1.0)}));
  EXPECT_EQ(Job(job).checkpoints_size(), 0);
  jm_->OnWorkerMessage("w1", Kept(job, uid,
                                  {Info("ckpt-1000.pt", 1000, 0.81), Info("ckpt-900.pt", 900, 0.82),
                                   Info("ckpt-500.pt", 500, 0.90)}));
  ASSERT_EQ(Job(job).checkpoints_size(), 3);
  // A checkpoint's own record is no point of the metric history (its values were reported
  // with their step and evaluation), though it is the job's latest record.
  v1::WorkerMessage marked;
  marked.mutable_metrics()->set_job_id(job);
  marked.mutable_metrics()->set_job_uid(uid);
  v1::MetricRecord* rec = marked.mutable_metrics()->add_records();
  rec->set_kind("checkpoint");
  rec->set_step(500);
  rec->set_has_step(true);
  rec->set_loss(0.2);
  rec->set_has_loss(true);
  (*rec->mutable_values())["test_accuracy"] = 0.9;
  rec->set_checkpoint_path("ckpt-500.pt");
  jm_->OnWorkerMessage("w1", marked);
  Metric("w1", job, 0, 0, 510);
  auto history = jm_->GetMetrics(job);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->ranks_size(), 1);
  EXPECT_EQ(history->ranks(0).evals_size(), 0);
  ASSERT_EQ(history->ranks(0).points_size(), 1);
  EXPECT_EQ(history->ranks(0).points(0).step(), 510);
  Exit("w1", job, 0, 0, 0);
  ASSERT_EQ(Job(job).state(), v1::SUCCEEDED);
  jm_->Tick();
  Restart();  // a coordinator restart: the list was saved with the job
  ASSERT_EQ(Job(job).checkpoints_size(), 3);
  EXPECT_EQ(Job(job).checkpoints(0).path(), "ckpt-1000.pt");
  EXPECT_EQ(Job(job).checkpoints(0).worker(), "w1");

  v1::JobSpec next = Spec();
  next.set_resume_from(job);
  next.set_resume_checkpoint("best");
  const std::string resumed = SubmitSpec(next);
  ASSERT_FALSE(resumed.empty());
  EXPECT_EQ(Job(resumed).resume_source().checkpoint_file(), "ckpt-500.pt");
  EXPECT_EQ(Job(resumed).resume_source().job_id(), job);
  EXPECT_NE(Job(resumed).message().find("the best checkpoint, ckpt-500.pt,"), std::string::npos)
      << Job(resumed).message();
  next.set_resume_checkpoint("latest");
  const std::string latest = SubmitSpec(next);
  EXPECT_EQ(Job(latest).resume_source().checkpoint_file(), "");
}

TEST_F(JobManagerCheckpointsTest, ResumeBestIsRefusedNamingTheFieldWhenThereIsNoBest) {
  AddWorker("w1", 1);
  v1::JobSpec plain = Spec();
  plain.clear_checkpoint();
  const std::string without = SubmitSpec(plain);
  ASSERT_EQ(StartAttempt(without).size(), 1u);
  Exit("w1", without, 0, 0, 0);
  const std::string unmarked = SubmitSpec(Spec());
  ASSERT_EQ(StartAttempt(unmarked).size(), 1u);
  jm_->OnWorkerMessage("w1", Kept(unmarked, Job(unmarked).uid(), {Info("c.pt", 10, {})}));
  Exit("w1", unmarked, 0, 0, 0);
  for (const std::string& from : {without, unmarked}) {
    v1::JobSpec next = Spec();
    next.set_resume_from(from);
    next.set_resume_checkpoint("best");
    auto id = jm_->Submit(next);
    ASSERT_FALSE(id.ok()) << from;
    EXPECT_EQ(id.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(id.status().message().rfind("resume_checkpoint: best: job " + from, 0), 0u)
        << id.status().message();
  }
}

}  // namespace job_manager_checkpoints_test
}  // namespace convoy

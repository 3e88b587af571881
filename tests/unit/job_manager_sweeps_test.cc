// Sweeps in the JobManager (coordinator/control/sweeps.h) with a fake clock and the in-memory
// store: a trial refused for its owner's quota waits in the sweep and is made when a job ends;
// a trial made just before a restart, which the sweep's stored record does not name yet, is
// adopted rather than made twice; a sweep is never placed itself.
#include <gtest/gtest.h>

#include "coordinator/state/job_state_machine.h"
#include "tests/support/job_manager_fixture.h"

namespace convoy {
namespace job_manager_sweeps_test {

class JobManagerSweepsTest : public JobManagerFixture {
 protected:
  v1::JobSpec SweepSpec(int values, int max_parallel) {
    v1::JobSpec spec;
    spec.set_name("sweep");
    spec.set_nodes(1);
    spec.set_procs_per_node(1);
    spec.add_command("train");
    v1::SweepParameter* p = spec.mutable_sweep()->add_parameters();
    p->set_path("env.LR");
    for (int i = 0; i < values; ++i) p->add_values(std::to_string(i + 1));
    spec.mutable_sweep()->set_max_parallel(max_parallel);
    return spec;
  }
  std::vector<v1::Job> TrialsOf(const std::string& sweep) {
    std::vector<v1::Job> out;
    for (const v1::Job& j : jm_->List()) {
      if (j.sweep_id() == sweep) out.push_back(j);
    }
    return out;
  }
};

TEST_F(JobManagerSweepsTest, ATrialOverQuotaWaitsInTheSweepAndIsMadeWhenAJobEnds) {
  options_.scheduling.max_queued_per_owner = 1;  // one waiting job per owner
  Restart();
  const std::string sweep = SubmitSpec(SweepSpec(3, 3), "alice", "user");
  ASSERT_FALSE(sweep.empty());
  jm_->Tick();
  // No worker: the first trial waits in the queue, the others in the sweep (quota).
  std::vector<v1::Job> trials = TrialsOf(sweep);
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].owner(), "alice");
  EXPECT_EQ(trials[0].owner_role(), "user");
  EXPECT_EQ(trials[0].trial_parameters(0).value(), "1");
  v1::Job s = *jm_->Get(sweep);
  EXPECT_EQ(s.state(), v1::RUNNING);
  EXPECT_EQ(s.sweep().waiting(), 2);
  EXPECT_EQ(s.sweep().running(), 1);
  EXPECT_EQ(s.queue_position(), 0);  // the sweep itself is never queued
  EXPECT_TRUE(s.attempts().empty());
  // The first trial ends: the second is made at the next tick, not before.
  ASSERT_TRUE(jm_->Cancel(trials[0].id(), "no worker today").ok());
  jm_->Tick();
  trials = TrialsOf(sweep);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[1].trial_parameters(0).value(), "2");
  s = *jm_->Get(sweep);
  EXPECT_EQ(s.sweep().waiting(), 1);
  EXPECT_EQ(s.sweep().failed(), 1);  // cancelled by its owner, not stopped by ASHA
}

// A sweep that waits for another job (`after`) makes no trial until that job ended the way
// it asked; then its trials are made at the next tick (Dependencies wakes it).
TEST_F(JobManagerSweepsTest, ASweepWaitingOnAnotherJobMakesItsTrialsOnceItIsMet) {
  v1::JobSpec first;
  first.set_name("train");
  first.set_nodes(2);  // no worker: it waits
  first.set_procs_per_node(1);
  first.add_command("train");
  const std::string a = SubmitSpec(first);
  v1::JobSpec spec = SweepSpec(2, 2);
  v1::JobDependency* d = spec.add_after();
  d->set_job_id(a);
  d->set_when(v1::DEPENDENCY_ENDED);
  const std::string sweep = SubmitSpec(spec);
  ASSERT_FALSE(sweep.empty());
  jm_->Tick();
  jm_->Tick();
  EXPECT_TRUE(TrialsOf(sweep).empty());
  EXPECT_EQ(jm_->Get(sweep)->waiting_for_size(), 1);
  ASSERT_TRUE(jm_->Cancel(a, "").ok());
  jm_->Tick();
  const std::vector<v1::Job> trials = TrialsOf(sweep);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].spec().after_size(), 0);  // a trial waits for nothing itself
  EXPECT_EQ(jm_->Get(sweep)->state(), v1::RUNNING);
}

// resume_from naming a sweep takes its best trial; a sweep without one is refused, saying so.
TEST_F(JobManagerSweepsTest, ResumingFromASweepWithoutABestTrialIsRefused) {
  const std::string sweep = SubmitSpec(SweepSpec(1, 1));
  jm_->Tick();
  ASSERT_TRUE(jm_->Cancel(sweep, "").ok());
  v1::JobSpec spec;
  spec.set_name("resume");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("train");
  spec.set_resume_from(sweep);
  auto refused = jm_->Submit(spec, "", "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "resume_from: sweep " + sweep +
                " has no best trial (none reported its metric, or it was deleted)");
}

TEST_F(JobManagerSweepsTest, ATrialTheStoredSweepDoesNotNameIsAdoptedAfterARestart) {
  const std::string sweep = SubmitSpec(SweepSpec(3, 1));
  jm_->Tick();
  ASSERT_EQ(TrialsOf(sweep).size(), 1u);
  const std::string first = TrialsOf(sweep)[0].id();
  // As if the coordinator died after writing the trial and before writing the sweep again.
  auto stored = store_.LoadJobs();
  ASSERT_TRUE(stored.ok());
  for (v1::Job job : *stored) {
    if (job.id() != sweep) continue;
    for (v1::TrialSummary& t : *job.mutable_sweep()->mutable_trials()) t.clear_job_id();
    job.clear_events();
    ASSERT_TRUE(store_.SaveJob(job, nullptr).ok());
  }
  auto rewritten = store_.LoadJobs();
  ASSERT_TRUE(rewritten.ok());
  for (const v1::Job& job : *rewritten) {
    if (job.id() == sweep) {
      EXPECT_TRUE(job.sweep().trials(0).job_id().empty());
    }
  }
  Restart();
  jm_->Tick();
  const std::vector<v1::Job> trials = TrialsOf(sweep);
  ASSERT_EQ(trials.size(), 1u);  // not made twice (max_parallel 1: nothing else yet)
  const v1::Job s = *jm_->Get(sweep);
  EXPECT_EQ(s.sweep().trials(0).job_id(), first);
  EXPECT_EQ(s.sweep().running(), 1);
  EXPECT_EQ(s.sweep().waiting(), 2);
  // It goes on from there: the trial ends, the next is made.
  ASSERT_TRUE(jm_->Cancel(first, "").ok());
  jm_->Tick();
  EXPECT_EQ(TrialsOf(sweep).size(), 2u);
}

TEST_F(JobManagerSweepsTest, ABadTrialValueIsRefusedAtSubmitNamingIt) {
  v1::JobSpec spec = SweepSpec(1, 1);
  v1::SweepParameter* p = spec.mutable_sweep()->add_parameters();
  p->set_path("nodes");
  p->add_values("1");
  p->add_values("many");
  auto refused = jm_->Submit(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("sweep.parameters[1].values[1]: nodes: expected an "
                                            "integer"),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(jm_->List().empty());
}

}  // namespace job_manager_sweeps_test
}  // namespace convoy

// When nodes are sick (README), through the JobManager with a fake clock, an in-memory store
// and a fake worker channel: the health gate, faults that follow the node (automatic cordons,
// free moves), stragglers and hangs named from step records.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "coordinator/control/job_manager.h"
#include "tests/support/job_manager_fixture.h"

namespace convoy {
namespace job_manager_sick_test {

class JobManagerSickTest : public JobManagerFixture {
 protected:
  void AddWorkerWithHealth(const std::string& name, v1::HealthState state,
                           const std::string& reason = "") {
    v1::Register reg = Registration(name, 1);
    reg.mutable_health()->set_state(state);
    reg.mutable_health()->set_reason(reason);
    AddWorker(reg);
  }
  void Health(const std::string& worker, v1::HealthState state) {
    v1::WorkerMessage hb;
    hb.mutable_heartbeat()->set_time_unix_ms(clock_.NowUnixMs());
    hb.mutable_heartbeat()->mutable_health()->set_state(state);
    jm_->OnWorkerMessage(worker, hb);
  }
  v1::WorkerInfo Worker(const std::string& name) {
    for (const v1::WorkerInfo& w : jm_->ListWorkers()) {
      if (w.name() == name) return w;
    }
    return {};
  }
  std::vector<std::string> WorkersOf(const v1::Attempt& a) {
    std::vector<std::string> out;
    for (const v1::NodeAssignment& n : a.nodes()) out.push_back(n.worker());
    std::sort(out.begin(), out.end());
    return out;
  }
  // A step record of `rank`, stamped now.
  void Step(const std::string& worker, const std::string& job, int attempt, int rank,
            int64_t step) {
    v1::WorkerMessage msg;
    auto* b = msg.mutable_metrics();
    b->set_job_id(job);
    b->set_attempt(attempt);
    auto* r = b->add_records();
    r->set_rank(rank);
    r->set_step(step);
    r->set_has_step(true);
    r->set_time_unix_ms(clock_.NowUnixMs());
    jm_->OnWorkerMessage(worker, msg);
  }
  // A rank failing the way a full disk fails a program.
  void DiskFull(const std::string& worker, const std::string& job, int attempt, int rank) {
    v1::WorkerMessage msg;
    auto* e = msg.mutable_process_exited();
    e->set_job_id(job);
    e->set_attempt(attempt);
    e->set_rank(rank);
    e->mutable_exit()->set_exit_code(1);
    e->mutable_exit()->add_stderr_tail("OSError: [Errno 28] No space left on device");
    jm_->OnWorkerMessage(worker, msg);
    jm_->Tick();
  }
  bool HasEvent(const v1::Job& job, const std::string& part) {
    for (const v1::JobEvent& e : job.events()) {
      if (e.reason().find(part) != std::string::npos) return true;
    }
    return false;
  }
};

TEST_F(JobManagerSickTest, AnUnhealthyWorkerGetsNoRanksAndComesBackWhenItsCheckPasses) {
  AddWorkerWithHealth("w1", v1::HEALTH_FAILING, "disk:work-dir: 12 MiB free");
  AddWorkerWithHealth("w2", v1::HEALTH_OK);
  AddWorkerWithHealth("w3", v1::HEALTH_CHECKING);
  // w1 sorts first and has as many free slots: only the gate keeps the job off it.
  const std::string a = Submit(1, 1);
  ASSERT_EQ(StartAttempt(a).size(), 1u);
  EXPECT_EQ(Job(a).attempts(0).nodes(0).worker(), "w2");
  // A second job waits, saying which workers were held back and why.
  const std::string b = Submit(1, 1);
  EXPECT_EQ(Job(b).state(), v1::PENDING);
  EXPECT_NE(Job(b).pending_reason().find("w1 (unhealthy: disk:work-dir: 12 MiB free)"),
            std::string::npos)
      << Job(b).pending_reason();
  EXPECT_NE(Job(b).pending_reason().find("w3 (its first health check runs)"), std::string::npos)
      << Job(b).pending_reason();
  EXPECT_EQ(Worker("w1").health().reason(), "disk:work-dir: 12 MiB free");
  // w3's first check passes: b is placed there at the next tick.
  Health("w3", v1::HEALTH_OK);
  jm_->Tick();
  EXPECT_EQ(Job(b).state(), v1::RENDEZVOUS);
  EXPECT_EQ(Job(b).attempts(0).nodes(0).worker(), "w3");
  // A rank that fails on an unhealthy worker is the node's fault, whatever it said.
  Health("w2", v1::HEALTH_FAILING);
  Exit("w2", a, 0, 0, 3);
  EXPECT_EQ(Job(a).attempts(0).failure().origin(), v1::FAILURE_ORIGIN_NODE);
}

TEST_F(JobManagerSickTest, RanksOfTwoJobsFailingOnOneNodeCordonItAndTheMovesAreFree) {
  AddWorker("w1", 2);
  AddWorker("w2", 1);
  const std::string a = Submit(1, 1);  // max_restarts 0: a restart used would fail it
  StartAttempt(a);
  const std::string b = Submit(1, 1);
  StartAttempt(b);
  ASSERT_EQ(Job(a).attempts(0).nodes(0).worker(), "w1");
  ASSERT_EQ(Job(b).attempts(0).nodes(0).worker(), "w1");
  DiskFull("w1", a, 0, 0);
  v1::Job ja = Job(a);
  EXPECT_EQ(ja.restarts(), 0);
  EXPECT_EQ(ja.node_moves(), 1);
  EXPECT_EQ(ja.attempts(0).failure().origin(), v1::FAILURE_ORIGIN_NODE);
  EXPECT_TRUE(HasEvent(ja, "moving off w1, no restart used"));
  ASSERT_EQ(ja.attempts_size(), 2);
  EXPECT_EQ(ja.attempts(1).nodes(0).worker(), "w2");  // avoided w1 though it has a free slot
  EXPECT_FALSE(Worker("w1").cordoned());              // one job proves little
  DiskFull("w1", b, 0, 0);
  const v1::WorkerInfo w1 = Worker("w1");
  EXPECT_TRUE(w1.cordoned());
  EXPECT_EQ(w1.cordoned_by(), "coordinator");
  EXPECT_NE(w1.cordon_reason().find(a + " ("), std::string::npos) << w1.cordon_reason();
  EXPECT_NE(w1.cordon_reason().find(b + " ("), std::string::npos) << w1.cordon_reason();
  EXPECT_EQ(w1.node_faults_size(), 2);
  EXPECT_TRUE(HasEvent(Job(b), "worker w1 cordoned: ranks of 2 jobs failed here"));
  EXPECT_EQ(jm_->GetStats().auto_cordons, 1);
  EXPECT_EQ(jm_->GetStats().node_faults, 2);
  // b waits for w2 (a holds it) rather than going back to the cordoned w1.
  EXPECT_EQ(Job(b).state(), v1::PENDING);
  EXPECT_NE(Job(b).pending_reason().find("w1 (cordoned: ranks of 2 jobs"), std::string::npos)
      << Job(b).pending_reason();
  EXPECT_EQ(Job(b).restarts(), 0);
  // The cordon outlives a coordinator restart; an admin lifts it, clearing the record.
  Restart();
  AddWorker("w1", 2);
  EXPECT_TRUE(Worker("w1").cordoned());
  auto lifted = jm_->SetCordoned("w1", false, "", "root");
  ASSERT_TRUE(lifted.ok()) << lifted.status().message();
  EXPECT_FALSE(lifted->cordoned());
  EXPECT_EQ(lifted->node_faults_size(), 0);
  EXPECT_EQ(jm_->SetCordoned("w9", true, "x", "root").status().code(), StatusCode::kNotFound);
}

TEST_F(JobManagerSickTest, AStragglerIsNamedInTheJobAndItsEvents) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  v1::JobSpec spec;
  spec.set_name("job");
  spec.set_nodes(2);
  spec.set_procs_per_node(1);
  spec.add_command("train");
  spec.set_straggler_steps(5);
  const std::string id = SubmitSpec(spec);
  StartAttempt(id);
  // Rank 1 reports each step 200 ms after rank 0 (a 100 ms step on rank 0).
  for (int s = 1; s <= 8; ++s) {
    clock_.AdvanceMs(100);
    Step("w1", id, 0, 0, s);
    clock_.AdvanceMs(200);
    Step("w2", id, 0, 1, s);
  }
  v1::Job job = Job(id);
  ASSERT_EQ(job.stragglers_size(), 1);
  EXPECT_EQ(job.stragglers(0).rank(), 1);
  EXPECT_EQ(job.stragglers(0).worker(), "w2");
  EXPECT_EQ(job.stragglers(0).at_step(), 6);
  EXPECT_EQ(job.step_times_size(), 2);
  EXPECT_TRUE(HasEvent(job, "straggler: rank 1 on w2 takes 0.300 s a step, 3.0x"));
  EXPECT_EQ(jm_->GetStats().stragglers_named, 1);
}

// Bad steps (trainer.max_bad_steps) from rank 0's records: the skips become one event (more
// that follow within kBadStepNoteMs wait for the next), a rewind an event of its own, both
// counted; another rank's copy of the same count is not counted twice.
TEST_F(JobManagerSickTest, BadStepsAndRewindsBecomeEventsAndCounters) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  v1::JobSpec spec;
  spec.set_name("job");
  spec.set_nodes(2);
  spec.set_procs_per_node(1);
  spec.add_command("train");
  const std::string id = SubmitSpec(spec);
  StartAttempt(id);
  auto record = [&](const std::string& worker, int rank, const std::string& kind, int64_t step,
                    double bad, double rewinds, double to = -1) {
    v1::WorkerMessage msg;
    auto* b = msg.mutable_metrics();
    b->set_job_id(id);
    b->set_attempt(0);
    auto* r = b->add_records();
    r->set_rank(rank);
    r->set_kind(kind);
    r->set_step(step);
    r->set_has_step(true);
    r->set_time_unix_ms(clock_.NowUnixMs());
    (*r->mutable_values())["bad_steps"] = bad;
    (*r->mutable_values())["rewinds"] = rewinds;
    if (to >= 0) (*r->mutable_values())["to_step"] = to;
    jm_->OnWorkerMessage(worker, msg);
  };
  clock_.AdvanceMs(100);
  record("w1", 0, "step", 10, 0, 0);
  record("w2", 1, "step", 10, 0, 0);
  EXPECT_EQ(jm_->GetStats().bad_steps, 0);
  clock_.AdvanceMs(100);
  record("w1", 0, "step", 12, 1, 0);  // step 11 was skipped
  record("w2", 1, "step", 12, 1, 0);
  clock_.AdvanceMs(100);
  record("w1", 0, "step", 14, 2, 0);  // within kBadStepNoteMs: counted, no second event
  record("w1", 0, "rewind", 16, 3, 1, 9);
  v1::Job job = Job(id);
  EXPECT_TRUE(HasEvent(job, "1 bad step(s) skipped by every rank by step 12")) << job.DebugString();
  EXPECT_FALSE(HasEvent(job, "by step 14"));
  EXPECT_TRUE(HasEvent(job,
                       "rewound: bad steps up to step 16; the ranks went back to their state of "
                       "step 9 and go on after the offending batches (3 bad steps skipped, 1 "
                       "rewind(s) in this attempt)"))
      << job.DebugString();
  EXPECT_EQ(jm_->GetStats().bad_steps, 3);
  EXPECT_EQ(jm_->GetStats().rewinds, 1);
}

TEST_F(JobManagerSickTest, AHangByProgressNamesTheSuspectAndTheRestartAvoidsItsNode) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  AddWorker("w3", 1);
  v1::JobSpec spec;
  spec.set_name("job");
  spec.set_nodes(2);
  spec.set_procs_per_node(1);
  spec.add_command("train");
  spec.set_max_restarts(1);
  spec.set_hang_steps(10);
  spec.set_hang_timeout_s(300);
  const std::string id = SubmitSpec(spec);
  StartAttempt(id);
  for (int s = 1; s <= 10; ++s) {
    clock_.AdvanceMs(100);
    Step("w1", id, 0, 0, s);
    Step("w2", id, 0, 1, s);
  }
  clock_.AdvanceMs(100);
  Step("w1", id, 0, 0, 11);  // rank 1 never reports step 11
  // 10 median steps are 1 s, under the 10 s floor: nothing at 9.9 s.
  Advance(9900);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Advance(200);
  v1::Job job = Job(id);
  ASSERT_TRUE(WentThrough(job, v1::RESTARTING));
  const v1::RankFailure& f = job.attempts(0).failure();
  EXPECT_EQ(f.cause(), v1::FAILURE_HANG);
  EXPECT_EQ(f.rank(), 1);
  EXPECT_EQ(f.worker(), "w2");
  EXPECT_NE(f.reason().find("rank 1 on w2 reported last least recently (step 10"),
            std::string::npos)
      << f.reason();
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(jm_->GetStats().progress_hangs, 1);
  ASSERT_EQ(job.attempts_size(), 2);
  EXPECT_EQ(WorkersOf(job.attempts(1)), (std::vector<std::string>{"w1", "w3"}));
}

}  // namespace job_manager_sick_test
}  // namespace convoy

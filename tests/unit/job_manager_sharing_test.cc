// The shared cluster in the JobManager (issue 16), with a fake clock, the in-memory store and
// a fake worker channel: preemption that stops the lowest-priority job and lets it resume
// without a restart, `drain --now`, quotas whose accounting returns to zero, GPUs given to
// processes by index, node selectors, and elastic jobs that shrink when a worker is lost and
// grow back when one joins.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "coordinator/sched/priority_scheduler.h"
#include "tests/support/job_manager_fixture.h"

namespace convoy {
namespace job_manager_sharing_test {

v1::JobSpec Spec(int nodes, int procs, int priority = 0) {
  v1::JobSpec spec;
  spec.set_name("job");
  spec.set_nodes(nodes);
  spec.set_procs_per_node(procs);
  spec.set_priority(priority);
  spec.add_command("train");
  return spec;
}

class SharingTest : public JobManagerFixture {
 protected:
  void SetUp() override {
    options_.scheduling.scheduler = &scheduler_;
    JobManagerFixture::SetUp();
  }

  // Ends every rank of the current attempt of `id` with `code` (as ranks that checkpointed
  // and stopped do, with 0).
  void EndAttempt(const std::string& id, int code = 0) {
    const v1::Job job = Job(id);
    const v1::Attempt& a = job.attempts(job.attempts_size() - 1);
    for (const v1::NodeAssignment& n : a.nodes()) {
      for (int rank : n.ranks()) Exit(n.worker(), id, a.attempt(), rank, code);
    }
  }

  std::vector<std::pair<std::string, v1::Kill>> Kills() {
    std::vector<std::pair<std::string, v1::Kill>> out;
    for (auto& [w, m] : channel_.Take(v1::CoordinatorMessage::kKill)) out.emplace_back(w, m.kill());
    return out;
  }

  std::vector<std::string> Workers(const std::string& id) {
    const v1::Job job = Job(id);
    std::vector<std::string> out;
    if (job.attempts_size() == 0) return out;
    for (const auto& n : job.attempts(job.attempts_size() - 1).nodes()) out.push_back(n.worker());
    return out;
  }

  v1::WorkerInfo Worker(const std::string& name) {
    for (const v1::WorkerInfo& w : jm_->ListWorkers()) {
      if (w.name() == name) return w;
    }
    ADD_FAILURE() << "no worker " << name;
    return {};
  }

  PriorityScheduler scheduler_;
};

TEST_F(SharingTest, AHigherPriorityJobPreemptsTheLowestWhichResumesWithoutARestart) {
  AddWorker("w1", 2);
  AddWorker("w2", 2);
  const std::string low = SubmitSpec(Spec(1, 2, -5));  // preemptible: priority < 0
  StartAttempt(low);
  const std::string lowest = SubmitSpec(Spec(1, 2, -10));
  StartAttempt(lowest);
  ASSERT_EQ(Job(low).state(), v1::RUNNING);
  ASSERT_EQ(Job(lowest).state(), v1::RUNNING);

  // A 1-node job of priority 0 does not fit: the lowest-priority job (and only it) is asked
  // to checkpoint and stop.
  const std::string urgent = SubmitSpec(Spec(1, 2, 0));
  auto kills = Kills();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].second.job_id(), lowest);
  EXPECT_TRUE(kills[0].second.preempt());
  EXPECT_EQ(kills[0].second.grace_ms(), options_.lifecycle.preempt_grace_ms);
  v1::Job victim = Job(lowest);
  EXPECT_EQ(victim.state(), v1::PENDING);
  EXPECT_EQ(victim.preemptions(), 1);
  EXPECT_EQ(victim.restarts(), 0);
  EXPECT_EQ(jm_->GetStats().preemptions, (std::map<std::string, int64_t>{{"priority", 1}}));
  EXPECT_TRUE(jm_->GetStats().restarts.empty());
  EXPECT_NE(victim.message().find("preempted by " + urgent), std::string::npos) << victim.message();
  EXPECT_EQ(Job(urgent).state(), v1::PENDING);
  EXPECT_NE(Job(urgent).pending_reason().find("preempting " + lowest), std::string::npos)
      << Job(urgent).pending_reason();

  // Its ranks checkpoint and exit 0: the slots come back and the urgent job starts there.
  EndAttempt(lowest);
  EXPECT_EQ(Job(urgent).state(), v1::RENDEZVOUS);
  StartAttempt(urgent);
  EXPECT_EQ(Job(lowest).state(), v1::PENDING);  // waits, holding nothing
  EXPECT_EQ(Job(low).state(), v1::RUNNING);     // never touched

  // When the urgent job ends the preempted one resumes: a new attempt, no restart used.
  EndAttempt(urgent);
  Advance(1000);
  StartAttempt(lowest);
  victim = Job(lowest);
  EXPECT_EQ(victim.state(), v1::RUNNING);
  EXPECT_EQ(victim.attempt(), 1);
  EXPECT_EQ(victim.restarts(), 0);
  EndAttempt(lowest);
  EXPECT_EQ(Job(lowest).state(), v1::SUCCEEDED);
}

TEST_F(SharingTest, NonPreemptibleAndHigherPriorityJobsAreNeverVictims) {
  AddWorker("w1", 2);
  v1::JobSpec kept = Spec(1, 2, -5);
  kept.set_preemptible(false);
  const std::string running = SubmitSpec(kept);
  StartAttempt(running);
  const std::string waiting = SubmitSpec(Spec(1, 2, 3));
  EXPECT_TRUE(Kills().empty());
  EXPECT_EQ(Job(running).state(), v1::RUNNING);
  // A job of equal priority, even if preemptible by its spec, is not preempted either.
  EndAttempt(running);
  StartAttempt(waiting);
  v1::JobSpec equal = Spec(1, 2, 3);
  equal.set_preemptible(true);
  SubmitSpec(equal);
  EXPECT_TRUE(Kills().empty());
}

TEST_F(SharingTest, DrainNowPreemptsWhatRunsThereAndItResumesElsewhere) {
  AddWorker("w1", 1);
  const std::string id = SubmitSpec(Spec(1, 1, 50));  // not preemptible by others
  StartAttempt(id);
  AddWorker("w2", 1);
  auto drained = jm_->SetDrained("w1", true, "admin", /*now=*/true);
  ASSERT_TRUE(drained.ok());
  auto kills = Kills();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_TRUE(kills[0].second.preempt());
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EndAttempt(id);
  StartAttempt(id);
  EXPECT_EQ(Workers(id), std::vector<std::string>{"w2"});
  EXPECT_EQ(Job(id).restarts(), 0);
  EXPECT_EQ(Job(id).preemptions(), 1);
  EXPECT_EQ(jm_->GetStats().preemptions, (std::map<std::string, int64_t>{{"drain", 1}}));
}

TEST_F(SharingTest, QuotaAccountingReturnsToZeroAfterEveryWayAJobStops) {
  ASSERT_TRUE(options_.scheduling.quotas.Add("role:user=slots:2").ok());
  Restart();
  AddWorker("w1", 4);
  AddWorker("w2", 4);
  auto over = [&](const std::string& id) { return Job(id).pending_reason(); };
  // alice may run 2 processes: her second 2-process job waits, saying why.
  const std::string a1 = SubmitSpec(Spec(1, 2), "alice", "user");
  StartAttempt(a1);
  const std::string a2 = SubmitSpec(Spec(1, 2), "alice", "user");
  EXPECT_EQ(Job(a2).state(), v1::PENDING);
  EXPECT_NE(over(a2).find("over quota: alice's running jobs use 2 of 2 processes (--quota "
                          "role:user) and this one needs 2"),
            std::string::npos)
      << over(a2);
  // Ends: a2 starts. Fails: the next starts. Cancelled: the next starts.
  EndAttempt(a1);
  StartAttempt(a2);
  const std::string a3 = SubmitSpec(Spec(1, 2), "alice", "user");
  EndAttempt(a2, 1);
  Advance(options_.lifecycle.failure_window_ms + 500);
  ASSERT_EQ(Job(a2).state(), v1::FAILED);
  EndAttempt(a2, 0);  // nothing left of it
  StartAttempt(a3);
  const std::string a4 = SubmitSpec(Spec(1, 2, -1), "alice", "user");
  ASSERT_TRUE(jm_->Cancel(a3, "", "alice").ok());
  EndAttempt(a3, 0);
  Advance(1000);
  StartAttempt(a4);
  // Preempted by bob's job of higher priority: alice's use returns to zero too, so a waiting
  // job of hers is over quota only by what runs.
  const std::string a5 = SubmitSpec(Spec(1, 2, -1), "alice", "user");
  EXPECT_NE(over(a5).find("use 2 of 2"), std::string::npos) << over(a5);
  const std::string bob = SubmitSpec(Spec(2, 4, 5), "bob", "admin");  // admins: no quota
  ASSERT_EQ(Job(a4).state(), v1::PENDING);                            // preempted
  EndAttempt(a4);
  StartAttempt(bob);
  EXPECT_EQ(over(a5).find("over quota"), std::string::npos) << over(a5);  // waits for room
  for (const v1::WorkerInfo& w : jm_->ListWorkers()) EXPECT_EQ(w.used_slots(), 4) << w.name();
  // bob's job ends: alice's preempted job resumes, and her other one is over quota again.
  EndAttempt(bob);
  StartAttempt(a4);
  EXPECT_NE(over(a5).find("use 2 of 2"), std::string::npos) << over(a5);
  EndAttempt(a4);
  StartAttempt(a5);
  EndAttempt(a5);
  for (const v1::WorkerInfo& w : jm_->ListWorkers()) {
    EXPECT_EQ(w.used_slots(), 0) << w.name();
    EXPECT_EQ(w.jobs_size(), 0) << w.name();
  }
  EXPECT_EQ(Job(a5).state(), v1::SUCCEEDED);
}

TEST_F(SharingTest, SubmitOverQuotaIsRefusedWhenConfiguredAndAlwaysWhenItCouldNeverRun) {
  ASSERT_TRUE(options_.scheduling.quotas.Add("user:alice=slots:4,gpus:1").ok());
  options_.refuse_over_quota = true;
  Restart();
  AddWorker("w1", 8);
  auto too_big = jm_->Submit(Spec(1, 5), "alice", "user");
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.status().message().find("it can never start"), std::string::npos);
  EXPECT_NE(too_big.status().message().find("--quota user:alice"), std::string::npos);
  const std::string first = SubmitSpec(Spec(1, 3), "alice", "user");
  StartAttempt(first);
  auto refused = jm_->Submit(Spec(1, 2), "alice", "user");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("use 3 of 4 processes"), std::string::npos)
      << refused.status().message();
  v1::JobSpec gpus = Spec(1, 1);
  gpus.set_gpus_per_proc(2);
  EXPECT_NE(jm_->Submit(gpus, "alice", "user").status().message().find("GPUs"), std::string::npos);
  // Others have no quota.
  EXPECT_TRUE(jm_->Submit(Spec(1, 5), "bob", "user").ok());
}

TEST_F(SharingTest, GpusAreGivenByIndexAndNeverTwice) {
  v1::Register reg = Registration("w1", 4);
  for (int g = 0; g < 4; ++g) reg.add_gpus(g);
  AddWorker(reg);
  v1::JobSpec spec = Spec(1, 1);
  spec.set_gpus_per_proc(2);
  spec.set_cpus_per_proc(1);
  const std::string a = SubmitSpec(spec);
  auto la = StartAttempt(a);
  const std::string b = SubmitSpec(spec);
  auto lb = StartAttempt(b);
  ASSERT_EQ(la.size(), 1u);
  ASSERT_EQ(lb.size(), 1u);
  ASSERT_EQ(la[0].second.resources_size(), 1);
  ASSERT_EQ(lb[0].second.resources_size(), 1);
  const auto ga = la[0].second.resources(0).gpus();
  const auto gb = lb[0].second.resources(0).gpus();
  EXPECT_EQ(std::vector<int>(ga.begin(), ga.end()), (std::vector<int>{0, 1}));
  EXPECT_EQ(std::vector<int>(gb.begin(), gb.end()), (std::vector<int>{2, 3}));
  EXPECT_EQ(la[0].second.resources(0).cpus(), 1);
  v1::WorkerInfo w = Worker("w1");
  EXPECT_EQ(w.used_gpus_size(), 4);
  EXPECT_EQ(w.used_cpus(), 2);
  // A third waits for GPUs although slots are free, and says so.
  const std::string c = SubmitSpec(spec);
  EXPECT_EQ(Job(c).state(), v1::PENDING);
  EXPECT_NE(Job(c).pending_reason().find("2 free GPUs"), std::string::npos)
      << Job(c).pending_reason();
  // a ends: its GPUs go to c; the assignment survives a coordinator restart.
  EndAttempt(a);
  auto lc = StartAttempt(c);
  ASSERT_EQ(lc.size(), 1u);
  const auto gc = lc[0].second.resources(0).gpus();
  EXPECT_EQ(std::vector<int>(gc.begin(), gc.end()), (std::vector<int>{0, 1}));
  Restart();
  v1::AttemptStatus running_b, running_c;
  for (auto [as, id] : {std::pair{&running_b, b}, std::pair{&running_c, c}}) {
    as->set_job_id(id);
    as->set_attempt(0);
    as->add_ranks()->set_running(true);
  }
  v1::Register again = reg;
  *again.add_attempts() = running_b;
  *again.add_attempts() = running_c;
  AddWorker(again);
  EXPECT_EQ(Worker("w1").used_gpus_size(), 4);
}

TEST_F(SharingTest, ANodeSelectorPlacesOnlyOnMatchingWorkers) {
  v1::Register a = Registration("w1", 2);
  (*a.mutable_labels())["zone"] = "a";
  v1::Register b = Registration("w2", 2);
  (*b.mutable_labels())["zone"] = "b";
  AddWorker(a);
  AddWorker(b);
  v1::JobSpec spec = Spec(1, 1);
  (*spec.mutable_node_selector())["zone"] = "b";
  const std::string id = SubmitSpec(spec);
  StartAttempt(id);
  EXPECT_EQ(Workers(id), std::vector<std::string>{"w2"});
  (*spec.mutable_node_selector())["zone"] = "c";
  const std::string none = SubmitSpec(spec);
  EXPECT_EQ(Job(none).state(), v1::PENDING);
  EXPECT_NE(Job(none).pending_reason().find("labels zone=c; 0 have them now"), std::string::npos)
      << Job(none).pending_reason();
}

TEST_F(SharingTest, AnElasticJobShrinksOnALostWorkerAndGrowsBackWhenOneJoins) {
  options_.scheduling.min_resize_interval_ms = 30000;
  Restart();
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  AddWorker("w3", 1);
  v1::JobSpec spec = Spec(0, 1);
  spec.set_min_nodes(2);
  spec.set_max_nodes(3);
  const std::string id = SubmitSpec(spec);
  auto launches = StartAttempt(id);
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0].second.world_size(), 3);
  EXPECT_EQ(launches[0].second.max_world_size(), 3);

  // w3 dies: the job goes on with two nodes, without using a restart.
  KillWorker("w3");
  Advance(11000);  // past the worker timeout (10 s)
  v1::Job job = Job(id);
  EXPECT_EQ(job.restarts(), 0);
  bool resized = false;
  for (const auto& e : job.events()) {
    resized = resized ||
              (e.to() == v1::RESTARTING && e.reason().find("no restart used") != std::string::npos);
  }
  EXPECT_TRUE(resized) << job.message();
  // Placed again at once on the two left (the teardown is not waited for); the lost
  // attempt's peers, whose collectives broke, exit later and change nothing.
  EXPECT_EQ(job.state(), v1::RENDEZVOUS);
  for (int rank : {0, 1}) Exit(rank == 0 ? "w1" : "w2", id, 0, rank, 1);
  Kills();  // of the lost attempt
  Advance(500);
  launches = StartAttempt(id);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].second.world_size(), 2);
  EXPECT_EQ(launches[0].second.max_world_size(), 3);  // the learning rate scales by 2/3
  EXPECT_EQ(Job(id).restarts(), 0);

  // A worker joins: nothing before the resize interval, then the ranks checkpoint and stop,
  // and the job restarts on three nodes.
  AddWorker("w4", 1);
  Advance(10000);
  EXPECT_TRUE(Kills().empty());
  Advance(25000);
  auto kills = Kills();
  ASSERT_EQ(kills.size(), 2u);
  EXPECT_TRUE(kills[0].second.preempt());
  job = Job(id);
  EXPECT_EQ(job.state(), v1::RESTARTING);
  EXPECT_NE(job.message().find("growing from 2 to 3 nodes: w4 is free"), std::string::npos)
      << job.message();
  EndAttempt(id);
  launches = StartAttempt(id);
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0].second.world_size(), 3);
  job = Job(id);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.preemptions(), 1);
  EndAttempt(id);
  EXPECT_EQ(Job(id).state(), v1::SUCCEEDED);
}

// Issue 29: a rank of an elastic job that exits saying "Network is unreachable" is a rank's
// failure, not a lost worker: it uses a restart (here none is left: FAILED), where the old
// text match made it a resize, which uses none, so that such a job could restart forever.
TEST_F(SharingTest, AnElasticRanksOwnWordsNeverMakeItsFailureALostWorker) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  v1::JobSpec spec = Spec(0, 1);
  spec.set_min_nodes(1);
  spec.set_max_nodes(2);
  spec.set_max_restarts(0);
  const std::string id = SubmitSpec(spec);
  auto launches = StartAttempt(id);
  ASSERT_EQ(launches.size(), 2u);
  v1::WorkerMessage msg;
  auto* e = msg.mutable_process_exited();
  e->set_job_id(id);
  e->set_attempt(0);
  e->set_rank(0);
  e->mutable_exit()->set_exit_code(1);
  e->mutable_exit()->set_error_type("OSError");
  e->mutable_exit()->set_error_message("[Errno 101] Network is unreachable (worker w2 lost:)");
  jm_->OnWorkerMessage(launches[0].first, msg);
  Advance(5000);  // past the failure window
  const v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::FAILED) << job.message();
  ASSERT_GT(job.attempts_size(), 0);
  EXPECT_EQ(job.attempts(0).failure().cause(), v1::FAILURE_RANK_EXIT);
  EXPECT_NE(job.message().find("Network is unreachable"), std::string::npos) << job.message();
  EXPECT_EQ(job.message().find("no restart used"), std::string::npos) << job.message();
}

TEST_F(SharingTest, AnElasticJobStartsWithWhatFitsAndWaitsBelowItsMinimum) {
  AddWorker("w1", 1);
  v1::JobSpec spec = Spec(0, 1);
  spec.set_min_nodes(2);
  spec.set_max_nodes(4);
  const std::string id = SubmitSpec(spec);
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_NE(Job(id).pending_reason().find("needs 2 to 4 workers"), std::string::npos)
      << Job(id).pending_reason();
  AddWorker("w2", 1);
  auto launches = StartAttempt(id);
  EXPECT_EQ(launches.size(), 2u);
}

TEST_F(SharingTest, WorkersShowCapacityUseAndJobs) {
  v1::Register reg = Registration("w1", 4);
  reg.set_memory_bytes(int64_t{64} << 30);
  AddWorker(reg);
  v1::JobSpec spec = Spec(1, 2);
  spec.set_cpus_per_proc(1);
  spec.set_memory_per_proc_bytes(int64_t{8} << 30);
  const std::string id = SubmitSpec(spec);
  StartAttempt(id);
  v1::WorkerInfo w = Worker("w1");
  EXPECT_EQ(w.memory_bytes(), int64_t{64} << 30);
  EXPECT_EQ(w.used_slots(), 2);
  EXPECT_EQ(w.used_cpus(), 2);
  EXPECT_EQ(w.used_memory_bytes(), int64_t{16} << 30);
  ASSERT_EQ(w.jobs_size(), 1);
  EXPECT_EQ(w.jobs(0), id);
  // More memory than is left: waits, saying so.
  v1::JobSpec big = Spec(1, 1);
  big.set_memory_per_proc_bytes(int64_t{60} << 30);
  const std::string waits = SubmitSpec(big);
  EXPECT_NE(Job(waits).pending_reason().find("60 GiB free"), std::string::npos)
      << Job(waits).pending_reason();
}

TEST_F(SharingTest, SubmissionOrderHoldsPastAMillionJobs) {
  // j-999999 waits (reloaded after a restart); j-1000000 comes after it. As strings,
  // "j-1000000" < "j-999999": the queue must order by number.
  options_.scheduling.scheduler = nullptr;  // FIFO: submission order alone
  Restart();
  v1::Job old;
  old.set_id("j-999999");
  *old.mutable_spec() = Spec(1, 1);
  old.set_state(v1::PENDING);
  ASSERT_TRUE(store_.SaveJob(old, nullptr).ok());
  Restart();
  const std::string next = SubmitSpec(Spec(1, 1));
  EXPECT_EQ(next, "j-1000000");
  AddWorker("w1", 1);
  EXPECT_EQ(Job("j-999999").state(), v1::RENDEZVOUS);
  EXPECT_EQ(Job(next).state(), v1::PENDING);
}

}  // namespace job_manager_sharing_test
}  // namespace convoy

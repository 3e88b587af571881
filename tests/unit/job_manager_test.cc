// JobManager with a fake clock, an in-memory store and a fake worker channel: the whole
// life of jobs, failures, restarts and recovery, without processes or sockets.
#include "coordinator/control/job_manager.h"

#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <set>
#include <vector>

#include "common/util.h"
#include "tests/support/job_manager_fixture.h"

namespace convoy {
namespace job_manager_test {

using JobManagerTest = JobManagerFixture;

TEST_F(JobManagerTest, HappyPathThroughEveryState) {
  AddWorker("w1", 2);
  AddWorker("w2", 2);
  const std::string id = Submit(2, 2);
  EXPECT_EQ(Job(id).state(), v1::RENDEZVOUS);
  auto launches = StartAttempt(id);
  ASSERT_EQ(launches.size(), 2u);
  for (const auto& [worker, l] : launches) {
    EXPECT_EQ(l.world_size(), 4);
    EXPECT_EQ(l.local_world_size(), 2);
    EXPECT_EQ(l.master_addr(), "10.0.0.1");
    EXPECT_EQ(l.master_port(), 40000);
    EXPECT_EQ(worker, l.group_rank() == 0 ? "w1" : "w2");
  }
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Exit("w1", id, 0, 0, 0);
  Exit("w1", id, 0, 1, 0);
  Exit("w2", id, 0, 2, 0);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Exit("w2", id, 0, 3, 0);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::SUCCEEDED);
  std::vector<v1::JobState> states;
  for (const auto& e : job.events()) states.push_back(e.to());
  EXPECT_EQ(states, (std::vector<v1::JobState>{v1::PENDING, v1::SCHEDULED, v1::RENDEZVOUS,
                                               v1::RUNNING, v1::SUCCEEDED}));
  // Every transition reached the store with its event.
  auto stored = store_.LoadJobs();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].state(), v1::SUCCEEDED);
  EXPECT_EQ((*stored)[0].events_size(), 5);
}

TEST_F(JobManagerTest, ADrainedWorkerGetsNoNewJobButKeepsItsOwnAndStaysDrained) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const std::string running = Submit(1, 1);
  auto launches = StartAttempt(running);
  ASSERT_EQ(launches.size(), 1u);
  const std::string busy = launches[0].first;
  const std::string idle = busy == "w1" ? "w2" : "w1";

  // Draining the busy worker leaves its rank alone: nothing is killed, the job runs on.
  auto drained = jm_->SetDrained(busy, true, "alice");
  ASSERT_TRUE(drained.ok()) << drained.status().message();
  EXPECT_TRUE(drained->drained());
  EXPECT_EQ(drained->drained_by(), "alice");
  EXPECT_EQ(drained->used_slots(), 1);
  EXPECT_TRUE(channel_.Take(v1::CoordinatorMessage::kKill).empty());
  EXPECT_EQ(Job(running).state(), v1::RUNNING);

  // Draining the idle one too: a new job waits although a slot is free once `running` ends.
  ASSERT_TRUE(jm_->SetDrained(idle, true, "alice").ok());
  const std::string waiting = Submit(1, 1);
  Exit(busy, running, 0, 0, 0);
  EXPECT_EQ(Job(running).state(), v1::SUCCEEDED);
  Advance(1000);
  EXPECT_EQ(Job(waiting).state(), v1::PENDING);
  EXPECT_TRUE(channel_.Take(v1::CoordinatorMessage::kReservePort).empty());

  // Drained survives the worker registering again and a coordinator restart.
  AddWorker(idle, 1);
  Restart();
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  for (const v1::WorkerInfo& w : jm_->ListWorkers()) {
    EXPECT_TRUE(w.drained()) << w.name();
  }
  EXPECT_EQ(Job(waiting).state(), v1::PENDING);

  // Undraining one lets the waiting job be placed there at the next tick.
  auto undrained = jm_->SetDrained(idle, false, "alice");
  ASSERT_TRUE(undrained.ok());
  EXPECT_FALSE(undrained->drained());
  EXPECT_EQ(undrained->drained_by(), "");
  jm_->Tick();
  auto ports = channel_.Take(v1::CoordinatorMessage::kReservePort);
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0].first, idle);

  EXPECT_EQ(jm_->SetDrained("w9", true, "alice").status().code(), StatusCode::kNotFound);
}

TEST_F(JobManagerTest, WaitsInPendingUntilTheWholeGangFits) {
  AddWorker("w1", 1);
  const std::string id = Submit(2, 1);
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_TRUE(channel_.sent.empty());  // nothing half-placed
  AddWorker("w2", 1);
  EXPECT_EQ(Job(id).state(), v1::RENDEZVOUS);
}

TEST_F(JobManagerTest, InvalidSpecIsRefusedAndNothingIsStored) {
  v1::JobSpec spec;
  spec.set_name("bad");
  spec.set_nodes(0);
  spec.set_procs_per_node(1);
  spec.add_command("x");
  auto id = jm_->Submit(spec);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(id.status().message().find("nodes"), std::string::npos);
  EXPECT_TRUE(jm_->List().empty());
  EXPECT_TRUE(store_.LoadJobs()->empty());
}

// A retried submit (its reply lost to a failover or a timeout) carries the same request id:
// it gets the job the first one made, also after a restart, and makes no second job; the id
// is the owner's, not the cluster's.
TEST_F(JobManagerTest, ARetriedSubmitWithTheSameRequestIdMakesNoSecondJob) {
  v1::JobSpec spec;
  spec.set_name("job");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("train");
  auto first = jm_->Submit(spec, "alice", "user", "submit-1");
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto again = jm_->Submit(spec, "alice", "user", "submit-1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  Restart();  // the index is rebuilt from the stored jobs
  again = jm_->Submit(spec, "alice", "user", "submit-1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  auto bobs = jm_->Submit(spec, "bob", "user", "submit-1");
  ASSERT_TRUE(bobs.ok());
  EXPECT_NE(*bobs, *first);
  auto other = jm_->Submit(spec, "alice", "user", "submit-2");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *first);
  EXPECT_EQ(jm_->List().size(), 3u);
  auto bad = jm_->Submit(spec, "alice", "user", "no spaces allowed");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("request_id: ", 0), 0u) << bad.status().message();
  EXPECT_EQ(jm_->List().size(), 3u);
}

TEST_F(JobManagerTest, RankFailureTearsDownAndRestartsOnTheSameWorkers) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  AddWorker("w3", 1);
  const std::string id = Submit(2, 1, /*max_restarts=*/1);
  StartAttempt(id);
  Exit("w2", id, 0, 1, 1);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);  // the failure window is still open
  Advance(options_.lifecycle.failure_window_ms);
  v1::Job job = Job(id);
  EXPECT_TRUE(WentThrough(job, v1::RESTARTING));
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(job.attempts(0).failure().rank(), 1);
  EXPECT_EQ(job.attempts(0).failure().worker(), "w2");
  EXPECT_EQ(job.attempts(0).failure().exit().exit_code(), 1);
  EXPECT_EQ(job.attempts(0).failure().exit().stderr_tail(0), "last words of rank 1");
  auto kills = channel_.Take(v1::CoordinatorMessage::kKill);
  ASSERT_EQ(kills.size(), 1u);  // rank 1 is already gone; only w1 has a rank left
  EXPECT_EQ(kills[0].first, "w1");
  // The next attempt is placed where the previous one ran at once: it does not wait for rank
  // 0's teardown (issue 45), whose exit, reported later, changes nothing.
  EXPECT_EQ(job.state(), v1::RENDEZVOUS);
  Exit("w1", id, 0, 0, 0, 15, /*by_worker=*/true);
  job = Job(id);
  EXPECT_EQ(job.state(), v1::RENDEZVOUS);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.attempts(1).nodes(0).worker(), "w1");
  EXPECT_EQ(job.attempts(1).nodes(1).worker(), "w2");
  auto launches = StartAttempt(id);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].second.restart_count(), 1);
  Exit("w1", id, 1, 0, 0);
  Exit("w2", id, 1, 1, 0);
  EXPECT_EQ(Job(id).state(), v1::SUCCEEDED);
}

TEST_F(JobManagerTest, RootCauseIsTheKilledRankNotThePeerThatFailedFirst) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const std::string id = Submit(2, 1);
  StartAttempt(id);
  // Rank 0's collective broke because rank 1 was SIGKILLed; its report arrives first.
  Exit("w1", id, 0, 0, 1);
  Exit("w2", id, 0, 1, 0, 9);
  Advance(options_.lifecycle.failure_window_ms);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.attempts(0).failure().rank(), 1);
  EXPECT_EQ(job.attempts(0).failure().exit().signal_name(), "SIGKILL");
  EXPECT_NE(job.message().find("SIGKILL"), std::string::npos);
  // The teardown's own kills are never reported as causes.
  int causes = 0;
  for (const auto& e : job.events()) causes += e.has_failure() ? 1 : 0;
  EXPECT_EQ(causes, 1);
}

TEST_F(JobManagerTest, AlwaysFailingJobUsesItsRestartsThenFails) {
  AddWorker("w1", 1);
  const std::string id = Submit(1, 1, /*max_restarts=*/2);
  for (int attempt = 0; attempt < 3; ++attempt) {
    StartAttempt(id);
    Exit("w1", id, attempt, 0, 7);
    jm_->Tick();  // a tick inside the failure window, with every rank already gone
    Advance(options_.lifecycle.failure_window_ms);
  }
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 2);
  EXPECT_EQ(job.attempts(2).failure().exit().exit_code(), 7);
  EXPECT_NE(job.message().find("no restarts left"), std::string::npos);
}

TEST_F(JobManagerTest, LostWorkerRestartsTheJobOnTheWorkersLeft) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  AddWorker("w3", 1);
  const std::string id = Submit(2, 1, 1);
  StartAttempt(id);
  KillWorker("w2");
  Advance(9000);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);  // not lost yet
  Advance(1500);
  v1::Job job = Job(id);
  ASSERT_GE(job.attempts_size(), 1);
  EXPECT_NE(job.attempts(0).failure().reason().find("worker w2"), std::string::npos);
  EXPECT_NE(job.attempts(0).failure().reason().find("lost"), std::string::npos);
  // w1 confirms its rank is gone; the new attempt avoids w2.
  Exit("w1", id, 0, 0, 0, 15, true);
  job = Job(id);
  EXPECT_EQ(job.state(), v1::RENDEZVOUS);
  ASSERT_EQ(job.attempts_size(), 2);
  EXPECT_EQ(job.attempts(1).nodes(0).worker(), "w1");
  EXPECT_EQ(job.attempts(1).nodes(1).worker(), "w3");
}

TEST_F(JobManagerTest, RestartWaitsInPendingWhenTooFewWorkersAreLeft) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const std::string id = Submit(2, 1, 1);
  StartAttempt(id);
  KillWorker("w2");
  Advance(10500);
  Exit("w1", id, 0, 0, 0, 15, true);
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  AddWorker("w3", 1);
  EXPECT_EQ(Job(id).state(), v1::RENDEZVOUS);
}

TEST_F(JobManagerTest, SilentRankIsHung) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const std::string id = Submit(2, 1, 1, /*hang_timeout_s=*/5);
  StartAttempt(id);
  Metric("w2", id, 0, 1, 0);  // rank 1 reports once, then falls silent
  for (int i = 1; i <= 10; ++i) {
    Metric("w1", id, 0, 0, i);  // rank 0 keeps making progress, rank 1 is silent
    Advance(500);
    if (Job(id).state() != v1::RUNNING) break;
  }
  v1::Job job = Job(id);
  EXPECT_TRUE(WentThrough(job, v1::RESTARTING));
  EXPECT_EQ(job.attempts(0).failure().reason(), "hung: no progress for 5 s from rank 1");
  EXPECT_EQ(job.attempts(0).failure().rank(), 1);
}

// Until its first record a rank is starting (loading its libraries and data, joining the
// rendezvous): its silence counts against the rendezvous timeout when that is longer than
// hang_timeout; from its first record on, hang_timeout applies.
TEST_F(JobManagerTest, ARankThatHasNotReportedYetHasTheStartupAllowance) {
  AddWorker("w1", 1);
  const std::string first = Submit(1, 1, 0, /*hang_timeout_s=*/5);
  StartAttempt(first);
  Advance(30000);
  EXPECT_EQ(Job(first).state(), v1::RUNNING) << "a starting rank was called hung";
  v1::WorkerMessage msg;
  msg.mutable_metrics()->set_job_id(first);
  auto* r = msg.mutable_metrics()->add_records();
  r->set_rank(0);
  r->set_kind("heartbeat");
  jm_->OnWorkerMessage("w1", msg);
  Advance(4000);
  EXPECT_EQ(Job(first).state(), v1::RUNNING);
  Advance(1500);
  v1::Job job = Job(first);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.attempts(0).failure().reason(), "hung: no progress for 5 s");
}

// A rank that never reports is hung once the startup allowance is spent.
TEST_F(JobManagerTest, ARankThatNeverReportsIsHungAfterTheStartupAllowance) {
  AddWorker("w1", 1);
  const std::string second = Submit(1, 1, 0, /*hang_timeout_s=*/5);
  StartAttempt(second);
  Advance(59000);
  EXPECT_EQ(Job(second).state(), v1::RUNNING);
  Advance(1500);
  const v1::Job job = Job(second);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.attempts(0).failure().reason(), "hung: nothing reported within 60 s of the start");
}

TEST_F(JobManagerTest, AStoppedRankIsNamedEvenWhenItsPeerFellSilentFirst) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const std::string id = Submit(2, 1, 1, /*hang_timeout_s=*/5);
  StartAttempt(id);
  Metric("w1", id, 0, 0, 1);
  Metric("w2", id, 0, 1, 1);
  Advance(500);
  Metric("w2", id, 0, 1, 2);  // rank 1's last record comes after rank 0's ...
  v1::StoppedRank s;
  s.set_job_id(id);
  s.set_attempt(0);
  s.set_rank(1);
  stopped_["w2"].push_back(s);  // ... but w2 reports its process stopped
  Advance(5000);                // rank 0 is past the limit first
  v1::Job job = Job(id);
  EXPECT_TRUE(WentThrough(job, v1::RESTARTING));
  EXPECT_EQ(job.attempts(0).failure().reason(),
            "hung: no progress for 5 s from rank 1 (its process is stopped)");
  EXPECT_EQ(job.attempts(0).failure().rank(), 1);
}

TEST_F(JobManagerTest, HeartbeatRecordsKeepARankAliveWithoutReplacingItsMetrics) {
  AddWorker("w1", 1);
  const std::string id = Submit(1, 1, 0, /*hang_timeout_s=*/5);
  StartAttempt(id);
  Metric("w1", id, 0, 0, 3);
  for (int i = 0; i < 20; ++i) {  // 10 s of evaluation: heartbeats only
    v1::WorkerMessage msg;
    msg.mutable_metrics()->set_job_id(id);
    auto* r = msg.mutable_metrics()->add_records();
    r->set_rank(0);
    r->set_kind("heartbeat");
    jm_->OnWorkerMessage("w1", msg);
    Advance(500);
  }
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::RUNNING);
  ASSERT_EQ(job.latest_size(), 1);
  EXPECT_EQ(job.latest(0).step(), 3);
  Advance(5000);  // silence: now it is hung
  EXPECT_EQ(Job(id).state(), v1::FAILED);
}

TEST_F(JobManagerTest, MetricsKeepTheLatestRecordPerRank) {
  AddWorker("w1", 2);
  const std::string id = Submit(1, 2);
  StartAttempt(id);
  Metric("w1", id, 0, 0, 1);
  Metric("w1", id, 0, 1, 1);
  Metric("w1", id, 0, 0, 2);
  Metric("w1", id, 0, 3, 1);  // not a rank of this attempt on w1: dropped
  v1::Job job = Job(id);
  ASSERT_EQ(job.latest_size(), 2);
  for (const auto& m : job.latest()) EXPECT_EQ(m.step(), m.rank() == 0 ? 2 : 1);
}

TEST_F(JobManagerTest, CancelKillsTheAttempt) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const std::string id = Submit(2, 1);
  StartAttempt(id);
  auto cancelled = jm_->Cancel(id, "");
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  EXPECT_EQ(channel_.Take(v1::CoordinatorMessage::kKill).size(), 2u);
  EXPECT_EQ(jm_->Cancel(id, "").status().code(), StatusCode::kFailedPrecondition);
  // Slots come back once the ranks are gone.
  Exit("w1", id, 0, 0, 0, 15, true);
  Exit("w2", id, 0, 1, 0, 15, true);
  for (const auto& w : jm_->ListWorkers()) EXPECT_EQ(w.used_slots(), 0) << w.name();
}

TEST_F(JobManagerTest, NothingIsSentWhenTheTransitionCannotBePersisted) {
  AddWorker("w1", 1);
  store_.FailNextWrite();
  v1::JobSpec spec;
  spec.set_name("job");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("x");
  EXPECT_FALSE(jm_->Submit(spec).ok());
  EXPECT_TRUE(jm_->List().empty());
  EXPECT_TRUE(channel_.sent.empty());

  const std::string id = Submit(1, 1);
  StartAttempt(id);
  // The only rank's exit is every failure there can be: decided at once, but not written.
  store_.FailNextWrite();
  v1::WorkerMessage exited;
  exited.mutable_process_exited()->set_job_id(id);
  exited.mutable_process_exited()->mutable_exit()->set_exit_code(3);
  jm_->OnWorkerMessage("w1", exited);       // no tick yet
  EXPECT_EQ(Job(id).state(), v1::RUNNING);  // the FAILED transition did not happen...
  EXPECT_TRUE(channel_.Take(v1::CoordinatorMessage::kKill).empty());  // ...so no teardown
  // Decided again at the next tick, and written this time.
  Advance(options_.lifecycle.failure_window_ms);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
}

TEST_F(JobManagerTest, CoordinatorRestartAdoptsRunningRanks) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const std::string id = Submit(2, 1);
  StartAttempt(id);
  Restart();  // the coordinator died; its memory is gone, the store is not
  channel_.sent.clear();
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  for (int rank = 0; rank < 2; ++rank) {
    v1::AttemptStatus as;
    as.set_job_id(id);
    as.set_attempt(0);
    auto* rs = as.add_ranks();
    rs->set_rank(rank);
    rs->set_pid(1000 + rank);
    rs->set_running(rank == 0);
    if (rank == 1) rs->mutable_exit()->set_exit_code(0);  // finished while we were down
    AddWorker(rank == 0 ? "w1" : "w2", 1, {as});
  }
  EXPECT_TRUE(channel_.Take(v1::CoordinatorMessage::kKill).empty());
  Advance(20000);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Exit("w1", id, 0, 0, 0);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::SUCCEEDED);
  EXPECT_EQ(job.restarts(), 0);
}

TEST_F(JobManagerTest, WorkerReportingAStaleAttemptIsToldToKillIt) {
  AddWorker("w1", 1);
  v1::AttemptStatus as;
  as.set_job_id("j-999999");
  as.set_attempt(0);
  as.add_ranks()->set_running(true);
  AddWorker("w2", 1, {as});
  auto kills = channel_.Take(v1::CoordinatorMessage::kKill);
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].first, "w2");
  EXPECT_EQ(kills[0].second.kill().job_id(), "j-999999");
}

TEST_F(JobManagerTest, RendezvousThatNeverCompletesTimesOut) {
  options_.lifecycle.rendezvous_timeout_ms = 5000;
  Restart();
  AddWorker("w1", 1);
  const std::string id = Submit(1, 1);
  channel_.sent.clear();  // the port request is never answered
  Advance(5500);
  v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_NE(job.message().find("rendezvous timed out"), std::string::npos);
}

// ---- Summaries, active jobs and counts (List(false), ListActive, GetStats)

TEST_F(JobManagerTest, SummariesLeaveOutEventsNodesAndExitsButCountThem) {
  AddWorker("w1", 2);
  AddWorker("w2", 2);
  const std::string done = Submit(2, 2);
  StartAttempt(done);
  for (int rank = 0; rank < 4; ++rank) Exit(rank < 2 ? "w1" : "w2", done, 0, rank, 0);
  const std::string waiting = Submit(3, 1);  // 3 nodes, 2 workers: PENDING
  auto summaries = jm_->List(/*full=*/false);
  ASSERT_EQ(summaries.size(), 2u);
  const v1::Job& s = summaries[0];
  EXPECT_EQ(s.id(), done);
  EXPECT_EQ(s.state(), v1::SUCCEEDED);
  EXPECT_EQ(s.events_size(), 0);
  ASSERT_EQ(s.attempts_size(), 1);
  EXPECT_EQ(s.attempts(0).nodes_size(), 0);
  EXPECT_EQ(s.attempts(0).exits_size(), 0);
  EXPECT_EQ(s.attempts(0).node_count(), 2);
  EXPECT_EQ(s.attempts(0).exit_count(), 4);
  EXPECT_EQ(s.attempts(0).master_port(), 40000);
  EXPECT_EQ(s.spec().nodes(), 2);
  auto full = jm_->List(/*full=*/true);
  EXPECT_EQ(full[0].events_size(), 5);
  EXPECT_EQ(full[0].attempts(0).nodes_size(), 2);
  EXPECT_EQ(full[0].attempts(0).exits_size(), 4);

  auto active = jm_->ListActive();
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].id(), waiting);
  EXPECT_EQ(active[0].events_size(), 0);
}

TEST_F(JobManagerTest, StatsCountJobsWorkersAndSlotsAsTheyChange) {
  AddWorker("w1", 2);
  AddWorker("w2", 3);
  JobManager::Stats st = jm_->GetStats();
  EXPECT_EQ(st.workers[v1::WORKER_READY], 2);
  EXPECT_EQ(st.slots_total, 5);
  EXPECT_EQ(st.slots_used, 0);
  EXPECT_TRUE(st.jobs.empty());

  const std::string id = Submit(2, 2);
  StartAttempt(id);
  const std::string big = Submit(5, 1);  // waits
  st = jm_->GetStats();
  EXPECT_EQ(st.jobs[v1::RUNNING], 1);
  EXPECT_EQ(st.jobs[v1::PENDING], 1);
  EXPECT_EQ(st.slots_used, 4);
  Exit(Job(id).attempts(0).nodes(0).worker(), id, 0, 0, 0);
  EXPECT_EQ(jm_->GetStats().slots_used, 3);  // a rank that is gone frees its slot

  KillWorker("w2");
  st = jm_->GetStats();
  EXPECT_EQ(st.workers[v1::WORKER_READY], 1);
  EXPECT_EQ(st.workers[v1::WORKER_UNREACHABLE], 1);
  EXPECT_EQ(st.slots_total, 2);  // only READY workers' slots
  Advance(10500);
  st = jm_->GetStats();
  EXPECT_EQ(st.workers.count(v1::WORKER_UNREACHABLE), 0u);
  EXPECT_EQ(st.workers[v1::WORKER_LOST], 1);
  // w2 was lost: the node's fault, so the job waits to move off it without using a restart
  // (README "When nodes are sick"), though it has none.
  EXPECT_EQ(st.jobs[v1::PENDING], 2);
  EXPECT_EQ(Job(id).node_moves(), 1);
  EXPECT_EQ(st.jobs.count(v1::RUNNING), 0u);
  ASSERT_TRUE(jm_->Cancel(big, "").ok());
  ASSERT_TRUE(jm_->Cancel(id, "").ok());
  st = jm_->GetStats();
  EXPECT_EQ(st.jobs[v1::CANCELLED], 2);
  EXPECT_EQ(st.jobs.count(v1::PENDING), 0u);
  EXPECT_TRUE(jm_->ListActive().empty());
}

// ---- Log requests with a wait (ReadLogs.wait_ms)

TEST_F(JobManagerTest, LogRequestCarriesItsWaitAndFailsAfterWaitPlusTheAnswerTimeout) {
  AddWorker("w1", 1);
  const std::string id = Submit(1, 1);
  StartAttempt(id);
  std::vector<StatusOr<v1::LogData>> got;
  auto fn = [&](const StatusOr<v1::LogData>& d) { got.push_back(d); };
  auto attempt = jm_->RequestLogs(id, 0, -1, 10, 4096, /*wait_ms=*/5000, fn);
  ASSERT_TRUE(attempt.ok());
  EXPECT_EQ(*attempt, 0);
  auto reads = channel_.Take(v1::CoordinatorMessage::kReadLogs);
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].first, "w1");
  const v1::ReadLogs& read = reads[0].second.read_logs();
  EXPECT_EQ(read.wait_ms(), 5000);
  EXPECT_EQ(read.offset(), 10);
  EXPECT_EQ(read.max_bytes(), 4096);
  Advance(5000 + options_.log_request_timeout_ms - 500);
  EXPECT_TRUE(got.empty());  // the worker may still be holding it
  Advance(500);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status().code(), StatusCode::kUnavailable);

  // An answer reaches its request.
  ASSERT_TRUE(jm_->RequestLogs(id, 0, 0, 0, 100, 0, fn).ok());
  reads = channel_.Take(v1::CoordinatorMessage::kReadLogs);
  ASSERT_EQ(reads.size(), 1u);
  v1::WorkerMessage answer;
  answer.mutable_log_data()->set_request_id(reads[0].second.read_logs().request_id());
  answer.mutable_log_data()->set_data("hello");
  jm_->OnWorkerMessage("w1", answer);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[1].ok());
  EXPECT_EQ(got[1]->data(), "hello");
  // A rank the job does not have is a usage error (the CLI exits 2), naming its ranks.
  auto no_rank = jm_->RequestLogs(id, 7, 0, 0, 100, 0, fn);
  EXPECT_EQ(no_rank.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(no_rank.status().message(), "job " + id + " has no rank 7; its ranks are 0")
      << no_rank.status().message();
}

// ---- Persistence in batches

TEST_F(JobManagerTest, ExitsAreWrittenOnceAtTheNextTick) {
  AddWorker("w1", 4);
  const std::string id = Submit(1, 4);
  StartAttempt(id);
  const int before = store_.saves[id];
  for (int rank = 0; rank < 3; ++rank) {
    v1::WorkerMessage msg;
    auto* e = msg.mutable_process_exited();
    e->set_job_id(id);
    e->set_attempt(0);
    e->set_rank(rank);
    jm_->OnWorkerMessage("w1", msg);
  }
  EXPECT_EQ(store_.saves[id], before);  // nothing written yet
  EXPECT_EQ(Job(id).attempts(0).exits_size(), 3);
  jm_->Tick();
  EXPECT_EQ(store_.saves[id], before + 1);  // three exits, one write
  auto stored = store_.LoadJobs();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ((*stored)[0].attempts(0).exits_size(), 3);
  jm_->Tick();
  EXPECT_EQ(store_.saves[id], before + 1);  // nothing new: nothing written
  // A transition is written at once, with its event.
  Exit("w1", id, 0, 3, 0);
  EXPECT_EQ((*store_.LoadJobs())[0].state(), v1::SUCCEEDED);
}

TEST_F(JobManagerTest, ExitsLostWithTheCoordinatorAreReplayedFromTheWorkersReport) {
  AddWorker("w1", 2);
  const std::string id = Submit(1, 2);
  StartAttempt(id);
  v1::WorkerMessage msg;
  auto* e = msg.mutable_process_exited();
  e->set_job_id(id);
  e->set_attempt(0);
  e->set_rank(0);
  jm_->OnWorkerMessage("w1", msg);
  Restart();  // kill -9 before the tick: rank 0's exit never reached the store
  EXPECT_EQ(Job(id).attempts(0).exits_size(), 0);
  v1::AttemptStatus as;
  as.set_job_id(id);
  as.set_attempt(0);
  for (int rank = 0; rank < 2; ++rank) {
    auto* rs = as.add_ranks();
    rs->set_rank(rank);
    rs->set_local_rank(rank);
    rs->set_running(rank == 1);
  }
  AddWorker("w1", 2, {as});
  EXPECT_EQ(Job(id).attempts(0).exits_size(), 1);
  Exit("w1", id, 0, 1, 0);
  EXPECT_EQ(Job(id).state(), v1::SUCCEEDED);
}

// ---- Per-worker costs: finished attempts keep no ranks

TEST_F(JobManagerTest, FinishedJobsLeaveNoTraceOnTheirWorkers) {
  AddWorker("w1", 2);
  AddWorker("w2", 2);
  for (int i = 0; i < 5; ++i) {
    const std::string id = Submit(2, 2);
    StartAttempt(id);
    for (int rank = 0; rank < 4; ++rank) Exit(rank < 2 ? "w1" : "w2", id, 0, rank, 0);
    ASSERT_EQ(Job(id).state(), v1::SUCCEEDED);
  }
  const std::string running = Submit(1, 1);
  StartAttempt(running);
  for (const v1::WorkerInfo& w : jm_->ListWorkers()) {
    // Only the running job is held; the finished ones dropped their ranks.
    if (w.jobs_size() > 0) {
      EXPECT_EQ(w.jobs_size(), 1) << w.name();
      EXPECT_EQ(w.jobs(0), running);
      EXPECT_EQ(w.used_slots(), 1);
    } else {
      EXPECT_EQ(w.used_slots(), 0) << w.name();
    }
  }
  // A heartbeat naming a stopped rank of a finished job changes nothing.
  v1::StoppedRank s;
  s.set_job_id("j-000001");
  s.set_attempt(0);
  s.set_rank(0);
  stopped_["w1"].push_back(s);
  Advance(1000);
  EXPECT_EQ(Job("j-000001").state(), v1::SUCCEEDED);
  EXPECT_EQ(Job(running).state(), v1::RUNNING);
}

// ---- Scheduling at the tick

TEST_F(JobManagerTest, RegistrationsArePlacedAtTheNextTickNotEachOnArrival) {
  const std::string id = Submit(3, 1);
  for (const std::string name : {"w1", "w2", "w3"}) {
    channel_.connected.insert(name);
    live_.insert(name);
    v1::Register reg;
    reg.set_name(name);
    reg.set_address("10.0.0." + name.substr(1));
    reg.set_slots(1);
    jm_->OnRegister(reg);
  }
  EXPECT_EQ(Job(id).state(), v1::PENDING);  // three registrations, no scheduling yet
  jm_->Tick();
  EXPECT_EQ(Job(id).state(), v1::RENDEZVOUS);
}

// A Scheduler that places nothing, counting its calls.
class CountingScheduler : public Scheduler {
 public:
  SchedulePlan Plan(const std::vector<WaitingJob>& waiting, std::vector<WorkerCapacity> capacity,
                    const ScheduleContext&) const override {
    ++calls;
    last_waiting = waiting.size();
    last_capacity = capacity.size();
    return {};
  }
  mutable int calls = 0;
  mutable size_t last_waiting = 0;
  mutable size_t last_capacity = 0;
};

TEST_F(JobManagerTest, AnotherSchedulerDecidesAndRunsAtMostOncePerTickWhenSomethingChanged) {
  CountingScheduler scheduler;
  options_.scheduling.scheduler = &scheduler;
  Restart();
  const std::string a = Submit(1, 1);
  Submit(1, 1);
  EXPECT_EQ(scheduler.calls, 2);  // Submit places at once
  for (int i = 1; i <= 3; ++i) {
    v1::Register reg;
    reg.set_name("w" + std::to_string(i));
    reg.set_slots(1);
    jm_->OnRegister(reg);
  }
  jm_->Tick();
  EXPECT_EQ(scheduler.calls, 3);  // three registrations, one run
  EXPECT_EQ(scheduler.last_waiting, 2u);
  EXPECT_EQ(scheduler.last_capacity, 3u);
  jm_->Tick();
  EXPECT_EQ(scheduler.calls, 3);           // nothing changed
  EXPECT_EQ(Job(a).state(), v1::PENDING);  // it placed nothing
}

// ---- Rendezvous: the launch carries each process's RANK

TEST_F(JobManagerTest, LaunchesCarryTheRanksOfTheirProcesses) {
  AddWorker("w1", 3);
  AddWorker("w2", 3);
  const std::string id = Submit(2, 3);
  auto launches = StartAttempt(id);
  ASSERT_EQ(launches.size(), 2u);
  for (const auto& [worker, l] : launches) {
    ASSERT_EQ(l.ranks_size(), 3) << worker;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(l.ranks(i), l.group_rank() * 3 + i);
  }
}

// ---- Scale: a 10,000-node job on 10,000 workers, start to finish (behaviour, not time)

TEST_F(JobManagerTest, TenThousandNodeJobRunsAndRestartsOnItsWorkers) {
  constexpr int kNodes = 10000;
  for (int i = 0; i < kNodes; ++i) {
    const std::string name = "w" + std::to_string(i);
    channel_.connected.insert(name);
    v1::Register reg;
    reg.set_name(name);
    reg.set_address("10.1." + std::to_string(i / 256) + "." + std::to_string(i % 256));
    reg.set_slots(1);
    jm_->OnRegister(reg);
  }
  jm_->Tick();
  const std::string id = Submit(kNodes, 1, /*max_restarts=*/1);
  ASSERT_EQ(Job(id).state(), v1::RENDEZVOUS);
  auto launches = StartAttempt(id);
  ASSERT_EQ(launches.size(), static_cast<size_t>(kNodes));
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_EQ(jm_->GetStats().slots_used, kNodes);
  // One rank fails; the teardown's exits arrive in any order; the restart keeps the nodes.
  std::map<int, std::string> worker_of;
  for (const auto& [worker, l] : launches) worker_of[l.ranks(0)] = worker;
  v1::WorkerMessage msg;
  auto* e = msg.mutable_process_exited();
  e->set_job_id(id);
  e->set_attempt(0);
  e->set_rank(kNodes / 2);
  e->mutable_exit()->set_exit_code(1);
  jm_->OnWorkerMessage(worker_of[kNodes / 2], msg);
  clock_.AdvanceMs(options_.lifecycle.failure_window_ms);
  jm_->Tick();
  ASSERT_TRUE(WentThrough(Job(id), v1::RESTARTING));
  EXPECT_EQ(channel_.Take(v1::CoordinatorMessage::kKill).size(), static_cast<size_t>(kNodes - 1));
  // The next attempt is placed without waiting for the teardown; the old ranks' exits, in any
  // order, change nothing.
  ASSERT_EQ(Job(id).state(), v1::RENDEZVOUS);
  for (int rank = kNodes - 1; rank >= 0; --rank) {
    if (rank == kNodes / 2) continue;
    e->set_rank(rank);
    e->mutable_exit()->set_signal(15);
    e->mutable_exit()->set_killed_by_worker(true);
    jm_->OnWorkerMessage(worker_of[rank], msg);
  }
  jm_->Tick();
  v1::Job job = Job(id);
  ASSERT_EQ(job.state(), v1::RENDEZVOUS);
  ASSERT_EQ(job.attempts_size(), 2);
  for (int n = 0; n < kNodes; n += 997) {
    EXPECT_EQ(job.attempts(1).nodes(n).worker(), job.attempts(0).nodes(n).worker());
  }
  launches = StartAttempt(id);
  ASSERT_EQ(launches.size(), static_cast<size_t>(kNodes));
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

// ---- What the metrics exporter reads (issue 14).

TEST_F(JobManagerTest, StatsCountAttemptsAndRestartsByCause) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  AddWorker("w3", 1);
  const std::string id = Submit(2, 1, /*max_restarts=*/2);
  StartAttempt(id);
  Exit("w2", id, 0, 1, 0, 9);  // SIGKILL: a signal
  Advance(options_.lifecycle.failure_window_ms);
  Exit("w1", id, 0, 0, 0, 15, true);
  StartAttempt(id);
  KillWorker("w2");
  Advance(10500);  // w2 lost
  JobManager::Stats st = jm_->GetStats();
  // The third attempt is placed on w1 and w3 at once (it does not wait for w1's teardown).
  EXPECT_EQ(st.attempts_started, 3);
  EXPECT_EQ(st.restarts["signal"], 1);
  EXPECT_EQ(st.restarts["worker_lost"], 1);
  EXPECT_EQ(st.attempt_failures["signal"], 1);
  EXPECT_EQ(st.attempt_failures["worker_lost"], 1);
  EXPECT_EQ(st.jobs_by_owner.at({"", v1::RENDEZVOUS}), 1);
}

TEST_F(JobManagerTest, PhaseDurationsAreRecordedOnceEach) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const std::string id = Submit(2, 1);  // placed at once: no time in the queue
  clock_.AdvanceMs(700);
  StartAttempt(id);  // every rank started 0.7 s after placement
  clock_.AdvanceMs(300);
  Metric("w1", id, 0, 0, 1);  // the first record 1 s after placement
  Metric("w2", id, 0, 1, 1);
  std::map<JobManager::Phase, std::vector<double>> by_phase;
  for (const auto& d : jm_->TakeDurations()) by_phase[d.phase].push_back(d.seconds);
  EXPECT_EQ(by_phase[JobManager::Phase::kQueue], std::vector<double>{0});
  EXPECT_EQ(by_phase[JobManager::Phase::kSchedule], std::vector<double>{0});
  EXPECT_EQ(by_phase[JobManager::Phase::kRendezvous], std::vector<double>{0.7});
  EXPECT_EQ(by_phase[JobManager::Phase::kFirstStep], std::vector<double>{1.0});
  EXPECT_TRUE(jm_->TakeDurations().empty());  // taken
  Exit("w1", id, 0, 0, 0);
  Exit("w2", id, 0, 1, 0);
  const std::vector<v1::Job> finished = jm_->TakeFinished();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].state(), v1::SUCCEEDED);
  EXPECT_TRUE(jm_->TakeFinished().empty());
}

// Issue 16: a user's waiting jobs are capped at submit, and what counts is what waits now:
// a cancelled job gives its place back.
TEST_F(JobManagerTest, QueuedQuotaRefusesPastItAndFreesWhatEnds) {
  options_.scheduling.max_queued_per_owner = 2;
  Restart();
  v1::JobSpec spec;
  spec.set_name("job");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("train");
  auto a = jm_->Submit(spec, "alice");
  auto b = jm_->Submit(spec, "alice");
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = jm_->Submit(spec, "alice");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("quota: alice has 2 jobs waiting"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("--max-queued-per-user 2"), std::string::npos);
  EXPECT_TRUE(jm_->Submit(spec, "bob").ok()) << "another user's queue is their own";
  EXPECT_TRUE(jm_->Submit(spec, "").ok()) << "jobs without an owner are not counted";
  ASSERT_TRUE(jm_->Cancel(*a, "", "alice").ok());
  EXPECT_TRUE(jm_->Submit(spec, "alice").ok()) << "the cancelled job's place was not given back";
}

// Job ids repeat across clusters; uids do not: each job gets its own at submit, every launch
// carries it with the cluster's id, and it survives a restart.
TEST_F(JobManagerTest, EveryJobHasItsOwnUidThatTravelsInEveryLaunch) {
  options_.lifecycle.cluster_id = "fedcba9876543210fedcba9876543210";
  Restart();
  AddWorker("w1", 2);
  AddWorker("w2", 2);
  const std::string a = Submit(2, 2);
  const std::string uid = Job(a).uid();
  EXPECT_TRUE(IsHexId(uid)) << uid;
  auto launches = StartAttempt(a);
  ASSERT_EQ(launches.size(), 2u);
  for (const auto& [worker, l] : launches) {
    EXPECT_EQ(l.job_uid(), uid) << worker;
    EXPECT_EQ(l.cluster_id(), "fedcba9876543210fedcba9876543210") << worker;
  }
  for (int rank = 0; rank < 4; ++rank) Exit(rank < 2 ? "w1" : "w2", a, 0, rank, 0);
  const std::string b = Submit(2, 2);
  EXPECT_TRUE(IsHexId(Job(b).uid()));
  EXPECT_NE(Job(b).uid(), uid);
  Restart();
  EXPECT_EQ(Job(a).uid(), uid) << "the uid is stored with the job";
}

// A job stored before uids existed gets one when loaded, and keeps it (it is written back).
TEST_F(JobManagerTest, AJobStoredWithoutAUidGetsOneAtLoadAndKeepsIt) {
  v1::Job old;
  old.set_id("j-000003");
  old.set_state(v1::SUCCEEDED);
  ASSERT_TRUE(store_.SaveJob(old, nullptr).ok());
  Restart();
  const std::string uid = Job("j-000003").uid();
  EXPECT_TRUE(IsHexId(uid)) << uid;
  auto stored = store_.LoadJobs();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].uid(), uid) << "written back";
  Restart();
  EXPECT_EQ(Job("j-000003").uid(), uid);
}

// A worker reports the snapshot directories it holds when it registers; the coordinator
// names those that belong to no job of this cluster that may still run, so that the worker
// removes them (another cluster's, a finished job's, one it never had).
TEST_F(JobManagerTest, ARegisteringWorkerIsToldWhichOfItsSnapshotsNoLiveJobOwns) {
  options_.lifecycle.cluster_id = "fedcba9876543210fedcba9876543210";
  Restart();
  AddWorker("w1", 1);
  const std::string running = Submit(1, 1);
  const std::string done = Submit(1, 1);  // waits: w1 has one slot
  const std::string c = options_.lifecycle.cluster_id;
  const std::string live_key = c + "-" + Job(running).uid();
  const std::string waiting_key = c + "-" + Job(done).uid();
  const std::string other_cluster = "0123456789abcdef0123456789abcdef-" + Job(running).uid();
  v1::Register reg = Registration("w2", 1);
  for (const std::string& k :
       std::vector<std::string>{live_key, waiting_key, other_cluster,
                                c + "-00000000000000000000000000000000", running, "j-000099"}) {
    reg.add_snapshot_keys(k);
  }
  v1::RegisterAck ack = jm_->OnRegister(reg);
  std::set<std::string> stale(ack.stale_snapshot_keys().begin(), ack.stale_snapshot_keys().end());
  EXPECT_EQ(stale, (std::set<std::string>{other_cluster, c + "-00000000000000000000000000000000",
                                          "j-000099"}));
  // Once finished, a job's snapshots are stale too.
  ASSERT_TRUE(jm_->Cancel(done, "", "").ok());
  ack = jm_->OnRegister(reg);
  stale = {ack.stale_snapshot_keys().begin(), ack.stale_snapshot_keys().end()};
  EXPECT_EQ(stale.count(waiting_key), 1u);
  EXPECT_EQ(stale.count(live_key), 0u);
}

// resume_from naming a job: only a finished job of the same owner, fixed at submit by its uid
// and carried in every Launch; anything else is refused naming the field.
TEST_F(JobManagerTest, ResumeFromNamesOnlyAFinishedJobOfTheSameOwner) {
  AddWorker("w1", 1);
  v1::JobSpec spec;
  spec.set_name("job");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("train");
  auto first = jm_->Submit(spec, "alice");
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(StartAttempt(*first).size(), 1u);
  spec.set_resume_from(*first);
  auto busy = jm_->Submit(spec, "alice");
  ASSERT_FALSE(busy.ok());
  EXPECT_NE(busy.status().message().find("resume_from: job " + *first + " is "), std::string::npos)
      << busy.status().message();
  ASSERT_TRUE(jm_->Cancel(*first, "", "alice").ok());
  Exit("w1", *first, 0, 0, 0, SIGTERM, true);
  auto foreign = jm_->Submit(spec, "bob");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("resume_from: job " + *first + " belongs to alice"),
            std::string::npos)
      << foreign.status().message();
  spec.set_resume_from("j-424242");
  auto missing = jm_->Submit(spec, "alice");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("resume_from: no job j-424242"), std::string::npos);
  spec.set_resume_from(*first);
  auto second = jm_->Submit(spec, "alice");
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(Job(*second).resume_source().uid(), Job(*first).uid());
  ASSERT_GT(Job(*second).events_size(), 0);
  EXPECT_NE(
      Job(*second).events(0).reason().find("starts from the newest checkpoint of job " + *first),
      std::string::npos)
      << Job(*second).events(0).reason();
  auto launches = StartAttempt(*second);
  ASSERT_EQ(launches.size(), 1u);
  for (const auto& [worker, l] : launches) {
    EXPECT_EQ(l.resume_source().job_id(), *first);
    EXPECT_EQ(l.resume_source().uid(), Job(*first).uid());
  }
}

// Every worker that ran an attempt of a job may hold its snapshots: when it finishes, each is
// told, not only the last attempt's (the soak found snapshots left on the others).
TEST_F(JobManagerTest, AFinishedJobIsAnnouncedToTheWorkersOfEveryAttempt) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const std::string id = Submit(1, 1, /*max_restarts=*/1);
  auto first = StartAttempt(id);
  ASSERT_EQ(first.size(), 1u);
  const std::string a = first[0].first;
  const std::string b = a == "w1" ? "w2" : "w1";
  ASSERT_TRUE(jm_->SetDrained(a, true, "").ok());  // the restart goes to the other one
  Exit(a, id, 0, 0, 1);
  auto second = StartAttempt(id);
  ASSERT_EQ(second.size(), 1u);
  ASSERT_EQ(second[0].first, b);
  channel_.Take(v1::CoordinatorMessage::kJobFinished);
  Exit(b, id, 1, 0, 0);
  ASSERT_EQ(Job(id).state(), v1::SUCCEEDED);
  std::set<std::string> told;
  for (const auto& [worker, msg] : channel_.Take(v1::CoordinatorMessage::kJobFinished)) {
    EXPECT_EQ(msg.job_finished().job_uid(), Job(id).uid());
    told.insert(worker);
  }
  EXPECT_EQ(told, (std::set<std::string>{"w1", "w2"}));
}

// Issue 29: max_runtime is timed on the monotonic clock: a step of the wall clock (NTP) does
// not fail a running job early, and the job still ends when its time is up.
TEST_F(JobManagerTest, MaxRuntimeIsTimedOnTheMonotonicClock) {
  AddWorker("w1", 1);
  v1::JobSpec spec;
  spec.set_name("bounded");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("train");
  spec.set_max_runtime_s(60);
  auto id = jm_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_EQ(StartAttempt(*id).size(), 1u);
  ASSERT_EQ(Job(*id).state(), v1::RUNNING);
  clock_.StepWallMs(2 * 3600 * 1000);  // the wall clock jumps two hours ahead
  Advance(30'000);
  EXPECT_EQ(Job(*id).state(), v1::RUNNING) << Job(*id).message();
  clock_.StepWallMs(-2 * 3600 * 1000);  // and back
  Advance(31'000);
  const v1::Job job = Job(*id);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_NE(job.message().find("max_runtime of 60 s exceeded"), std::string::npos) << job.message();
}

}  // namespace job_manager_test
}  // namespace convoy

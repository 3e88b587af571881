// When nodes are sick (README), the pure parts: whose fault a rank failure is
// (fault_origin.h), the window that cordons a node (node_faults.h), the spec's fields
// (progress_spec.h) and placement that avoids a node (scheduler.h). Times are a FakeClock's.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/sched/scheduler.h"
#include "coordinator/state/fault_origin.h"
#include "coordinator/state/node_faults.h"
#include "coordinator/state/worker_registry.h"
#include "spec/progress_spec.h"

namespace convoy {
namespace sick_nodes_test {

v1::RankFailure Exit(int code, int signal, v1::FailureCause cause,
                     const std::vector<std::string>& stderr_tail = {}) {
  v1::RankFailure f;
  f.set_rank(1);
  f.set_worker("w2");
  f.set_cause(cause);
  f.mutable_exit()->set_exit_code(code);
  f.mutable_exit()->set_signal(signal);
  for (const std::string& line : stderr_tail) f.mutable_exit()->add_stderr_tail(line);
  return f;
}

TEST(FaultOriginTest, AnExitCodeIsTheJobsAndAFullDiskIsTheNodes) {
  v1::RankFailure plain = Exit(1, 0, v1::FAILURE_RANK_EXIT, {"ValueError: lr too large"});
  AttributeOrigin(&plain, nullptr);
  EXPECT_EQ(plain.origin(), v1::FAILURE_ORIGIN_JOB);
  EXPECT_TRUE(plain.origin_reason().empty());

  v1::RankFailure disk = Exit(1, 0, v1::FAILURE_RANK_EXIT,
                              {"Traceback ...", "OSError: [Errno 28] No space left on device"});
  AttributeOrigin(&disk, nullptr);
  EXPECT_EQ(disk.origin(), v1::FAILURE_ORIGIN_NODE);
  EXPECT_NE(disk.origin_reason().find("No space left on device"), std::string::npos);

  v1::RankFailure error_file = Exit(1, 0, v1::FAILURE_RANK_EXIT);
  error_file.mutable_exit()->set_error_message("CUDA error: uncorrectable ECC error encountered");
  AttributeOrigin(&error_file, nullptr);
  EXPECT_EQ(error_file.origin(), v1::FAILURE_ORIGIN_NODE);
}

TEST(FaultOriginTest, SignalsLostWorkersAndUnhealthyWorkers) {
  v1::RankFailure bus = Exit(0, SIGBUS, v1::FAILURE_SIGNAL);
  AttributeOrigin(&bus, nullptr);
  EXPECT_EQ(bus.origin(), v1::FAILURE_ORIGIN_NODE);
  v1::RankFailure segv = Exit(0, SIGSEGV, v1::FAILURE_SIGNAL);
  AttributeOrigin(&segv, nullptr);
  EXPECT_EQ(segv.origin(), v1::FAILURE_ORIGIN_JOB);  // a bug of the job as likely as not
  v1::RankFailure killed = Exit(0, SIGBUS, v1::FAILURE_SIGNAL);
  killed.mutable_exit()->set_killed_by_worker(true);
  AttributeOrigin(&killed, nullptr);
  EXPECT_EQ(killed.origin(), v1::FAILURE_ORIGIN_JOB);

  v1::RankFailure lost = Exit(0, 0, v1::FAILURE_WORKER_LOST);
  AttributeOrigin(&lost, nullptr);
  EXPECT_EQ(lost.origin(), v1::FAILURE_ORIGIN_NODE);

  v1::WorkerInfo sick;
  sick.set_name("w2");
  sick.mutable_health()->set_state(v1::HEALTH_FAILING);
  sick.mutable_health()->set_reason("disk:work-dir: 12 MiB free");
  v1::RankFailure any = Exit(3, 0, v1::FAILURE_RANK_EXIT);
  AttributeOrigin(&any, &sick);
  EXPECT_EQ(any.origin(), v1::FAILURE_ORIGIN_NODE);
  EXPECT_NE(any.origin_reason().find("12 MiB free"), std::string::npos);

  // A hang is the job's (the suspect's node is avoided, but not blamed).
  v1::RankFailure hang = Exit(0, 0, v1::FAILURE_HANG);
  AttributeOrigin(&hang, nullptr);
  EXPECT_EQ(hang.origin(), v1::FAILURE_ORIGIN_JOB);
}

TEST(FaultOriginTest, AMoveIsFreeOncePerNodeAndAtMostThreeTimes) {
  v1::Job job;
  job.set_attempt(2);
  v1::RankFailure f = Exit(1, 0, v1::FAILURE_RANK_EXIT, {"No space left on device"});
  AttributeOrigin(&f, nullptr);
  EXPECT_TRUE(NodeMoveIsFree(job, f));
  // The job's own failure never moves it for free.
  v1::RankFailure own = Exit(1, 0, v1::FAILURE_RANK_EXIT);
  AttributeOrigin(&own, nullptr);
  EXPECT_FALSE(NodeMoveIsFree(job, own));
  // Failed on w2 for the node's reasons before: now it may be the job.
  v1::Attempt* before = job.add_attempts();
  before->set_attempt(1);
  *before->mutable_failure() = f;
  EXPECT_FALSE(NodeMoveIsFree(job, f));
  f.set_worker("w3");
  EXPECT_TRUE(NodeMoveIsFree(job, f));
  job.set_node_moves(kMaxFreeNodeMoves);
  EXPECT_FALSE(NodeMoveIsFree(job, f));
}

v1::NodeFault Fault(const std::string& job) {
  v1::NodeFault f;
  f.set_job_id(job);
  f.set_reason("'No space left on device' in what the rank said last");
  return f;
}

TEST(NodeFaultTrackerTest, TwoJobsWithinTheWindowCordonOneJobTwiceDoesNot) {
  FakeClock clock;
  NodeFaultTracker t(clock, {/*window_ms=*/60'000, /*jobs_to_cordon=*/2});
  EXPECT_FALSE(t.Record("w2", Fault("j-000001")).has_value());
  clock.AdvanceMs(1000);
  EXPECT_FALSE(t.Record("w2", Fault("j-000001")).has_value());  // the same job again
  EXPECT_FALSE(t.Record("w1", Fault("j-000002")).has_value());  // another node
  clock.AdvanceMs(1000);
  auto why = t.Record("w2", Fault("j-000002"));
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("ranks of 2 jobs failed here"), std::string::npos) << *why;
  EXPECT_NE(why->find("within 1m"), std::string::npos) << *why;
  EXPECT_NE(why->find("j-000001 ("), std::string::npos) << *why;
  EXPECT_NE(why->find("j-000002 ("), std::string::npos) << *why;
  EXPECT_EQ(t.Faults("w2").size(), 3u);
  t.Clear("w2");
  EXPECT_TRUE(t.Faults("w2").empty());
}

TEST(NodeFaultTrackerTest, FaultsOlderThanTheWindowAreForgotten) {
  FakeClock clock;
  NodeFaultTracker t(clock, {/*window_ms=*/60'000, /*jobs_to_cordon=*/2});
  EXPECT_FALSE(t.Record("w2", Fault("j-000001")).has_value());
  clock.AdvanceMs(60'001);
  EXPECT_TRUE(t.Faults("w2").empty());
  EXPECT_FALSE(t.Record("w2", Fault("j-000002")).has_value());
  EXPECT_EQ(t.Faults("w2").size(), 1u);
  // 0 jobs: never cordons by itself, but still keeps the record.
  NodeFaultTracker never(clock, {60'000, 0});
  EXPECT_FALSE(never.Record("w2", Fault("j-1")).has_value());
  EXPECT_FALSE(never.Record("w2", Fault("j-2")).has_value());
  EXPECT_EQ(never.Faults("w2").size(), 2u);
}

TEST(WorkerGateTest, UnhealthyCheckingCordonedAndDrainedTakeNoNewRanks) {
  v1::WorkerInfo w;
  w.set_name("w1");
  w.set_state(v1::WORKER_READY);
  EXPECT_TRUE(TakesNewRanks(w));  // a worker older than health checks
  w.mutable_health()->set_state(v1::HEALTH_OK);
  EXPECT_TRUE(TakesNewRanks(w));
  EXPECT_EQ(WhyNoNewRanks(w), "");
  w.mutable_health()->set_state(v1::HEALTH_CHECKING);
  EXPECT_FALSE(TakesNewRanks(w));
  w.mutable_health()->set_state(v1::HEALTH_FAILING);
  w.mutable_health()->set_reason("program: exit 1: fan 3 stopped");
  EXPECT_FALSE(TakesNewRanks(w));
  EXPECT_EQ(WhyNoNewRanks(w), "unhealthy: program: exit 1: fan 3 stopped");
  w.mutable_health()->set_state(v1::HEALTH_OK);
  w.set_cordoned(true);
  w.set_cordon_reason("ECC errors");
  EXPECT_FALSE(TakesNewRanks(w));
  EXPECT_EQ(WhyNoNewRanks(w), "cordoned: ECC errors");
}

TEST(WorkerGateTest, TheRegistryKeepsHealthAndSaysWhenTheGateChanged) {
  FakeClock clock;
  WorkerRegistry reg(clock, 10'000);
  v1::Register r;
  r.set_name("w1");
  r.set_slots(1);
  r.mutable_health()->set_state(v1::HEALTH_CHECKING);
  reg.OnRegister(r);
  EXPECT_FALSE(TakesNewRanks(*reg.Find("w1")));
  v1::WorkerHealth ok;
  ok.set_state(v1::HEALTH_OK);
  EXPECT_TRUE(reg.SetHealth("w1", ok));   // the gate opened
  EXPECT_FALSE(reg.SetHealth("w1", ok));  // nothing changed
  EXPECT_TRUE(TakesNewRanks(*reg.Find("w1")));
  EXPECT_FALSE(reg.SetHealth("nobody", ok));
  ASSERT_NE(reg.SetCordoned("w1", true, "bad NIC", "root"), nullptr);
  EXPECT_EQ(reg.Find("w1")->cordoned_by(), "root");
  EXPECT_GT(reg.Find("w1")->cordoned_unix_ms(), 0);
  reg.SetCordoned("w1", false, "", "root");
  EXPECT_FALSE(reg.Find("w1")->cordoned());
  EXPECT_EQ(reg.Find("w1")->cordon_reason(), "");
}

WorkerCapacity Free(const std::string& name, int slots) {
  WorkerCapacity w;
  w.name = name;
  w.free_slots = slots;
  return w;
}

TEST(PlaceGangAvoidTest, AnAvoidedNodeIsChosenOnlyWhenNothingElseFits) {
  v1::JobSpec spec;
  spec.set_nodes(2);
  spec.set_procs_per_node(1);
  const std::vector<WorkerCapacity> three{Free("w1", 1), Free("w2", 1), Free("w3", 1)};
  // The restart prefers its last nodes (w1, w2), but w2 failed it: w3 instead.
  auto chosen = PlaceGang(spec, three, {"w1", "w2"}, {"w2"});
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(*chosen, (std::vector<std::string>{"w1", "w3"}));
  // Only two workers: the avoided one is used rather than waiting for ever.
  const std::vector<WorkerCapacity> two{Free("w1", 1), Free("w2", 1)};
  chosen = PlaceGang(spec, two, {"w1", "w2"}, {"w2"});
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(*chosen, (std::vector<std::string>{"w1", "w2"}));
  // An elastic job does not grow onto an avoided node.
  v1::JobSpec elastic;
  elastic.set_min_nodes(1);
  elastic.set_max_nodes(3);
  elastic.set_procs_per_node(1);
  chosen = PlaceGang(elastic, three, {}, {"w1"});
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(chosen->size(), 2u);
  EXPECT_EQ(std::count(chosen->begin(), chosen->end(), "w1"), 0);
}

TEST(ProgressSpecTest, DefaultsAndProblemsNameTheirField) {
  v1::JobSpec spec;
  EXPECT_EQ(StragglerFactor(spec), kDefaultStragglerFactor);
  EXPECT_EQ(StragglerSteps(spec), kDefaultStragglerSteps);
  EXPECT_EQ(HangSteps(spec), 0);
  EXPECT_FALSE(ReplacesStragglers(spec));
  EXPECT_TRUE(FindProgressSpecProblems(spec).empty());
  spec.set_straggler_factor(0);  // off
  EXPECT_TRUE(FindProgressSpecProblems(spec).empty());
  spec.set_straggler_factor(1.0);
  spec.set_straggler_steps(2);
  spec.set_on_straggler("evict");
  spec.set_hang_steps(1);
  const std::vector<SpecProblem> p = FindProgressSpecProblems(spec);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].field, "straggler_factor");
  EXPECT_EQ(p[1].field, "straggler_steps");
  EXPECT_EQ(p[2].field, "on_straggler");
  EXPECT_NE(p[2].message.find("'evict'"), std::string::npos);
  EXPECT_EQ(p[3].field, "hang_steps");
  spec.set_on_straggler("replace");
  EXPECT_TRUE(ReplacesStragglers(spec));
}

}  // namespace sick_nodes_test
}  // namespace convoy

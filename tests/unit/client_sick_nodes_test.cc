// How sick workers and ranks read in the CLI (README "When nodes are sick"): `convoy workers`
// with its WHY column, `convoy status` with stragglers, node moves and a node's fault, and
// `convoy top`'s SLOWEST cell.
#include "client/sick_nodes.h"

#include <gtest/gtest.h>

#include <string>

#include "client/format.h"
#include "client/top.h"

namespace convoy {
namespace client_sick_nodes_test {

constexpr int64_t kT0 = 1'700'000'000'000;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ClientSickNodesTest, WorkersShowUnhealthyAndCordonedWithWhy) {
  v1::ListWorkersResponse list;
  v1::WorkerInfo* ok = list.add_workers();
  ok->set_name("w1");
  ok->set_state(v1::WORKER_READY);
  ok->mutable_health()->set_state(v1::HEALTH_OK);
  v1::WorkerInfo* sick = list.add_workers();
  sick->set_name("w2");
  sick->set_state(v1::WORKER_READY);
  sick->mutable_health()->set_state(v1::HEALTH_FAILING);
  sick->mutable_health()->set_reason("program: exit 1: fan 3 stopped");
  sick->set_cordoned(true);
  sick->set_cordoned_by("coordinator");
  sick->set_cordon_reason("ranks of 2 jobs failed here");
  const std::string table = FormatWorkerTable(list, kT0);
  EXPECT_TRUE(Has(table, "WHY")) << table;
  EXPECT_TRUE(Has(table, "READY,UNHEALTHY,CORDONED")) << table;
  EXPECT_TRUE(Has(table,
                  "health check: program: exit 1: fan 3 stopped; cordoned by "
                  "coordinator: ranks of 2 jobs failed here"))
      << table;
  // Nothing wrong anywhere: no WHY column at all.
  list.mutable_workers()->RemoveLast();
  EXPECT_FALSE(Has(FormatWorkerTable(list, kT0), "WHY"));
  v1::WorkerInfo checking;
  checking.mutable_health()->set_state(v1::HEALTH_CHECKING);
  EXPECT_EQ(SickStateSuffix(checking), ",CHECKING");
  EXPECT_EQ(SickReason(checking), "first health check running");
}

v1::Job StragglingJob() {
  v1::Job job;
  job.set_id("j-000001");
  job.set_state(v1::RUNNING);
  job.mutable_spec()->set_name("fmnist");
  job.set_node_moves(1);
  v1::Straggler* s = job.add_stragglers();
  s->set_rank(1);
  s->set_worker("w2");
  s->set_step_s(0.3);
  s->set_peers_s(0.05);
  s->set_window_steps(20);
  s->set_at_step(22);
  return job;
}

TEST(ClientSickNodesTest, StatusNamesStragglersMovesAndTheNodesFault) {
  v1::Job job = StragglingJob();
  v1::Attempt* a = job.add_attempts();
  v1::RankFailure* f = a->mutable_failure();
  f->set_rank(0);
  f->set_reason("rank 0 exited with code 1");
  f->set_origin(v1::FAILURE_ORIGIN_NODE);
  f->set_origin_reason("'No space left on device' in what the rank said last");
  const std::string text = FormatJobStatus(job, kT0);
  EXPECT_TRUE(Has(text,
                  "straggler: rank 1 on w2: 0.300 s a step, 6.0x its peers' median "
                  "(0.050 s) over the last 20 steps; named at step 22"))
      << text;
  EXPECT_TRUE(Has(text, "moved off a sick node 1 time, no restart used")) << text;
  EXPECT_TRUE(Has(text, "the node's fault: 'No space left on device'")) << text;
}

TEST(ClientSickNodesTest, TopShowsTheStragglerAsTheSlowestRank) {
  v1::ListJobsResponse jobs;
  *jobs.add_jobs() = StragglingJob();
  EXPECT_TRUE(Has(FormatTop(jobs, kT0), "rank 1 6.0x (straggler)")) << FormatTop(jobs, kT0);
  EXPECT_EQ(TopStragglerCell(v1::Job()), "");
}

TEST(ClientSickNodesTest, StatusAndTopCountTheAttemptsBadStepsAndRewinds) {
  v1::Job job = StragglingJob();
  for (int rank : {0, 1}) {
    v1::MetricRecord* m = job.add_latest();
    m->set_rank(rank);
    m->set_step(40);
    m->set_has_step(true);
    m->set_loss(0.5);
    m->set_has_loss(true);
    (*m->mutable_values())["bad_steps"] = 4;
    (*m->mutable_values())["rewinds"] = 1;
  }
  const std::string text = FormatJobStatus(job, kT0);
  EXPECT_TRUE(Has(text, "bad steps: 4 skipped by every rank, 1 rewind in this attempt")) << text;
  v1::ListJobsResponse jobs;
  *jobs.add_jobs() = job;
  EXPECT_TRUE(Has(FormatTop(jobs, kT0), "0.5000 (4 bad)")) << FormatTop(jobs, kT0);
  EXPECT_FALSE(Has(FormatJobStatus(StragglingJob(), kT0), "bad steps"));
}

TEST(ClientSickNodesTest, AnEventThatChangesNoStateShowsTheStateOnce) {
  v1::JobEvent e;
  e.set_time_unix_ms(kT0);
  e.set_from(v1::RUNNING);
  e.set_to(v1::RUNNING);
  e.set_reason("straggler: rank 1 on w2");
  const std::string text = FormatEvent(e);
  EXPECT_FALSE(Has(text, "->")) << text;
  EXPECT_TRUE(Has(text, "RUNNING  straggler: rank 1 on w2")) << text;
}

}  // namespace client_sick_nodes_test
}  // namespace convoy

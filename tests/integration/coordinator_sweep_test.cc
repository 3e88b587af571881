// Sweeps end to end in one process (README "Sweeps"): a real coordinator (SQLite or etcd) and
// a real in-process worker running tiny Python trials that report through examples/python's
// convoy_metrics. A 3-trial sweep with max_parallel 2 never has more than 2 trials unfinished
// and reports the best; with ASHA a hopeless trial is stopped early with its reason in its
// events; cancelling a sweep cancels its trials; a sweep survives a coordinator restart.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "tests/support/etcd_cluster.h"
#include "tests/support/test_cluster.h"

namespace convoy {
namespace coordinator_sweep_test {

using namespace std::chrono_literals;

constexpr const char* kPython = "/usr/bin/python3";

// A trial: reports `score` (= LR, the swept value) and `loss` (= LR / step) for STEPS steps,
// SLEEP seconds apart (the hopeless LR >= 50 sleeps longer, so the others reach each rung
// first), then exits 0.
constexpr const char* kTrialScript = R"PY(
import os, time, convoy_metrics
lr = float(os.environ["LR"])
steps = int(os.environ.get("STEPS", "3"))
pause = float(os.environ.get("SLOW", "0.3")) if lr >= 50 else float(os.environ.get("SLEEP", "0.05"))
for step in range(1, steps + 1):
    convoy_metrics.report(kind="step", step=step, loss=lr / step, score=lr)
    time.sleep(pause)
)PY";

v1::JobSpec TrialSpec(const std::vector<std::string>& lrs, int max_parallel) {
  v1::JobSpec spec;
  spec.set_name("lr-sweep");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command(kPython);
  spec.add_command("-c");
  spec.add_command(kTrialScript);
  (*spec.mutable_env())["PYTHONPATH"] = std::string(CONVOY_SOURCE_DIR) + "/examples/python";
  (*spec.mutable_env())["LR"] = "1";
  v1::SweepSpec* sweep = spec.mutable_sweep();
  v1::SweepParameter* p = sweep->add_parameters();
  p->set_path("env.LR");
  for (const std::string& lr : lrs) p->add_values(lr);
  sweep->set_max_parallel(max_parallel);
  return spec;
}

std::vector<v1::Job> Trials(testing::TestCluster& cluster, const std::string& sweep) {
  grpc::ClientContext ctx;
  v1::ListJobsRequest req;
  req.set_sweep_id(sweep);
  req.set_full(true);
  v1::ListJobsResponse resp;
  EXPECT_TRUE(cluster.jobs().ListJobs(&ctx, req, &resp).ok());
  return {resp.jobs().begin(), resp.jobs().end()};
}

// When the job ended (its terminal event), or INT64_MAX.
int64_t EndedMs(const v1::Job& job) {
  for (const v1::JobEvent& e : job.events()) {
    if (e.to() == v1::SUCCEEDED || e.to() == v1::FAILED || e.to() == v1::CANCELLED) {
      return e.time_unix_ms();
    }
  }
  return INT64_MAX;
}

class SweepTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (access(kPython, X_OK) != 0) GTEST_SKIP() << "needs " << kPython;
    if (GetParam() == "etcd" && !testing::EtcdCluster::Available()) {
      GTEST_SKIP() << "etcd is not installed (etcd-server)";
    }
    auto options = testing::TestCluster::DefaultOptions();
    options.etcd = GetParam() == "etcd";
    cluster_ = std::make_unique<testing::TestCluster>(options);
  }
  std::unique_ptr<testing::TestCluster> cluster_;
};

TEST_P(SweepTest, ThreeTrialsTwoAtATimeRunToTheEndAndTheBestIsReported) {
  cluster_->StartWorker("w1", 3);
  const std::string id = cluster_->Submit([] {
    v1::JobSpec spec = TrialSpec({"0.2", "0.9", "0.5"}, 2);
    spec.mutable_sweep()->set_metric("score");
    spec.mutable_sweep()->set_goal("max");
    return spec;
  }());
  ASSERT_TRUE(cluster_->WaitForState(id, v1::SUCCEEDED, 60s)) << cluster_->GetJob(id).DebugString();
  const v1::Job sweep = cluster_->GetJob(id);
  EXPECT_TRUE(sweep.attempts().empty());  // it ran no process itself
  ASSERT_EQ(sweep.sweep().trials_size(), 3);
  EXPECT_EQ(sweep.sweep().succeeded(), 3);
  EXPECT_EQ(sweep.sweep().failed() + sweep.sweep().stopped() + sweep.sweep().running(), 0);
  const std::vector<v1::Job> trials = Trials(*cluster_, id);
  ASSERT_EQ(trials.size(), 3u);
  std::string best;
  for (const v1::Job& t : trials) {
    EXPECT_EQ(t.state(), v1::SUCCEEDED) << t.id();
    EXPECT_EQ(t.sweep_id(), id);
    ASSERT_EQ(t.trial_parameters_size(), 1);
    if (t.trial_parameters(0).value() == "0.9") best = t.id();
  }
  EXPECT_EQ(sweep.sweep().best_trial(), best);
  for (const v1::TrialSummary& t : sweep.sweep().trials()) {
    if (t.job_id() == best) {
      EXPECT_DOUBLE_EQ(t.best_metric(), 0.9);
    }
  }
  // Never more than 2 unfinished: at any trial's creation, fewer than 2 others had been made
  // and not yet ended.
  for (const v1::Job& t : trials) {
    int others = 0;
    for (const v1::Job& o : trials) {
      if (o.id() != t.id() && o.created_unix_ms() <= t.created_unix_ms() &&
          EndedMs(o) > t.created_unix_ms()) {
        ++others;
      }
    }
    EXPECT_LT(others, 2) << t.id() << " was made while " << others << " others ran";
  }
  // The third was made only after one ended.
  std::vector<int64_t> created;
  for (const v1::Job& t : trials) created.push_back(t.created_unix_ms());
  std::sort(created.begin(), created.end());
  int64_t first_end = INT64_MAX;
  for (const v1::Job& t : trials) first_end = std::min(first_end, EndedMs(t));
  EXPECT_GE(created[2], first_end);
  // `convoy list` shows the sweep as one row: trials only when asked.
  grpc::ClientContext ctx;
  v1::ListJobsRequest req;
  v1::ListJobsResponse all;
  ASSERT_TRUE(cluster_->jobs().ListJobs(&ctx, req, &all).ok());
  ASSERT_EQ(all.jobs_size(), 1);
  EXPECT_EQ(all.jobs(0).id(), id);
  EXPECT_EQ(all.jobs(0).sweep().trials_size(), 3);
  grpc::ClientContext ctx2;
  req.set_include_trials(true);
  ASSERT_TRUE(cluster_->jobs().ListJobs(&ctx2, req, &all).ok());
  EXPECT_EQ(all.jobs_size(), 4);
}

TEST_P(SweepTest, AshaStopsTheHopelessTrialWithItsReasonInItsEvents) {
  cluster_->StartWorker("w1", 3);
  // loss = LR / step, goal min: LR 100 is hopeless. Rungs at steps 2, 6, 18; a rung judges
  // once 3 trials are there, and the hopeless trial reports slowly, so the two others are
  // past step 6 (and done) before it reaches step 2: it alone is judged.
  v1::JobSpec spec = TrialSpec({"1", "2", "100"}, 3);
  (*spec.mutable_env())["STEPS"] = "12";
  (*spec.mutable_env())["SLOW"] = "1.5";
  v1::SweepSpec* sweep = spec.mutable_sweep();
  sweep->set_metric("loss");
  sweep->set_goal("min");
  sweep->set_early_stop("asha");
  sweep->mutable_asha()->set_min_steps(2);
  sweep->mutable_asha()->set_reduction_factor(3);
  const std::string id = cluster_->Submit(spec);
  ASSERT_TRUE(cluster_->WaitForState(id, v1::SUCCEEDED, 60s)) << cluster_->GetJob(id).DebugString();
  const v1::Job done = cluster_->GetJob(id);
  EXPECT_EQ(done.sweep().stopped(), 1);
  EXPECT_EQ(done.sweep().succeeded(), 2);
  std::map<std::string, v1::Job> by_lr;
  for (const v1::Job& t : Trials(*cluster_, id)) by_lr[t.trial_parameters(0).value()] = t;
  ASSERT_EQ(by_lr.size(), 3u);
  const v1::Job& hopeless = by_lr["100"];
  EXPECT_EQ(hopeless.state(), v1::CANCELLED);
  bool said = false;
  for (const v1::JobEvent& e : hopeless.events()) {
    if (e.to() != v1::CANCELLED) continue;
    said = e.reason().rfind("stopped early (ASHA): loss ", 0) == 0 &&
           e.reason().find("is not in the top 1/3 of 3 trials") != std::string::npos;
    EXPECT_TRUE(said) << e.reason();
  }
  EXPECT_TRUE(said);
  EXPECT_EQ(done.sweep().best_trial(), by_lr["1"].id());
  for (const v1::TrialSummary& t : done.sweep().trials()) {
    EXPECT_EQ(t.stopped_reason().empty(), t.job_id() != hopeless.id()) << t.DebugString();
  }
}

TEST_P(SweepTest, CancellingTheSweepCancelsItsTrialsAndMakesNoMore) {
  cluster_->StartWorker("w1", 2);
  v1::JobSpec spec = TrialSpec({"1", "2", "3", "4"}, 2);
  (*spec.mutable_env())["STEPS"] = "600";  // a minute: cancelled long before
  const std::string id = cluster_->Submit(spec);
  ASSERT_TRUE(testing::TestCluster::WaitFor(
      [&] { return cluster_->GetJob(id).sweep().running() == 2; }, 30s));
  grpc::ClientContext ctx;
  v1::CancelJobRequest req;
  req.set_job_id(id);
  v1::Job cancelled;
  ASSERT_TRUE(cluster_->jobs().CancelJob(&ctx, req, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), v1::CANCELLED);
  for (const v1::Job& t : Trials(*cluster_, id)) {
    EXPECT_TRUE(cluster_->WaitForState(t.id(), v1::CANCELLED, 30s)) << t.id();
  }
  std::this_thread::sleep_for(300ms);  // a few ticks: nothing more is made
  EXPECT_EQ(Trials(*cluster_, id).size(), 2u);
  const v1::Job after = cluster_->GetJob(id);
  EXPECT_EQ(after.sweep().waiting(), 0);
  EXPECT_EQ(after.sweep().running(), 0);
}

TEST_P(SweepTest, ASweepSurvivesACoordinatorRestart) {
  cluster_->StartWorker("w1", 1);
  v1::JobSpec spec = TrialSpec({"1", "2", "3"}, 1);
  (*spec.mutable_env())["STEPS"] = "10";
  (*spec.mutable_env())["SLEEP"] = "0.1";
  const std::string id = cluster_->Submit(spec);
  ASSERT_TRUE(testing::TestCluster::WaitFor(
      [&] { return cluster_->GetJob(id).sweep().running() == 1; }, 30s));
  cluster_->StopCoordinator();
  cluster_->StartCoordinator();
  ASSERT_TRUE(cluster_->WaitForState(id, v1::SUCCEEDED, 90s)) << cluster_->GetJob(id).DebugString();
  const std::vector<v1::Job> trials = Trials(*cluster_, id);
  EXPECT_EQ(trials.size(), 3u);  // none made twice
  const v1::Job done = cluster_->GetJob(id);
  EXPECT_EQ(done.sweep().succeeded(), 3);
  std::set<std::string> ids;
  for (const v1::TrialSummary& t : done.sweep().trials()) ids.insert(t.job_id());
  EXPECT_EQ(ids.size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(BothStores, SweepTest, ::testing::Values("sqlite", "etcd"),
                         [](const auto& info) { return info.param; });

}  // namespace coordinator_sweep_test
}  // namespace convoy

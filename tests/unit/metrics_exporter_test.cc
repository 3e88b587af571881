// The coordinator's exporter on a fake clock: per-job and per-rank series, stragglers,
// counters by cause, phase histograms, bounded RPC labels, and retention (a finished job's
// series stay for --metrics-retention, then go).
#include "coordinator/rpc/metrics_exporter.h"

#include <gtest/gtest.h>

#include <string>

#include "common/clock.h"

namespace convoy {
namespace metrics_exporter_test {

v1::Job RunningJob(const std::string& id, int64_t now_ms) {
  v1::Job job;
  job.set_id(id);
  job.mutable_spec()->set_name("fmnist");
  job.set_owner("alice");
  job.set_state(v1::RUNNING);
  job.set_restarts(1);
  for (int rank = 0; rank < 2; ++rank) {
    v1::MetricRecord* m = job.add_latest();
    m->set_rank(rank);
    m->set_has_step(true);
    m->set_step(rank == 0 ? 120 : 100);  // rank 1 lags by 20 steps
    m->set_epoch(1);
    m->set_has_loss(true);
    m->set_loss(0.5);
    m->set_time_unix_ms(now_ms - 2000);
    (*m->mutable_values())["samples_per_s"] = 1000;
    (*m->mutable_values())["test_accuracy"] = 0.85;
  }
  return job;
}

bool Has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

class MetricsExporterTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  MetricsExporter exporter_{clock_, {"", 10 * 60 * 1000}};
};

TEST_F(MetricsExporterTest, PerRankAndPerJobSeries) {
  Coordinator::ExportSnapshot snap;
  snap.stats.jobs[v1::RUNNING] = 1;
  snap.stats.jobs_by_owner[{"alice", v1::RUNNING}] = 1;
  snap.active.push_back(RunningJob("j-000001", clock_.NowUnixMs()));
  v1::WorkerInfo w;
  w.set_name("w1");
  w.set_last_heartbeat_unix_ms(clock_.NowUnixMs() - 3000);
  snap.workers.push_back(w);
  snap.durations.push_back({JobManager::Phase::kQueue, 0.2});
  snap.durations.push_back({JobManager::Phase::kFirstStep, 3});
  exporter_.Update(snap);
  const std::string text = exporter_.Serialize();
  EXPECT_TRUE(Has(text, "convoy_jobs{state=\"RUNNING\"} 1")) << text;
  EXPECT_TRUE(Has(text, "convoy_owner_jobs{owner=\"alice\",state=\"RUNNING\"} 1"));
  EXPECT_TRUE(Has(text, "convoy_rank_step{job_id=\"j-000001\",rank=\"1\"} 100"));
  EXPECT_TRUE(Has(text, "convoy_rank_loss{job_id=\"j-000001\",rank=\"0\"} 0.5"));
  EXPECT_TRUE(Has(text, "convoy_rank_test_accuracy_ratio{job_id=\"j-000001\",rank=\"0\"} 0.85"));
  EXPECT_TRUE(Has(text, "convoy_rank_last_record_age_seconds{job_id=\"j-000001\",rank=\"0\"} 2"));
  EXPECT_TRUE(Has(text, "convoy_job_samples_per_second{job_id=\"j-000001\"} 2000"));
  EXPECT_TRUE(Has(text, "convoy_job_step_skew{job_id=\"j-000001\"} 20"));
  EXPECT_TRUE(Has(text, "convoy_job_slowest_rank{job_id=\"j-000001\",rank=\"1\"} 1"));
  EXPECT_TRUE(Has(text, "convoy_worker_heartbeat_age_seconds{worker=\"w1\"} 3"));
  EXPECT_TRUE(Has(text, "convoy_job_queue_seconds_count 1"));
  EXPECT_TRUE(Has(text, "convoy_job_first_step_seconds_sum 3"));
  EXPECT_TRUE(Has(text, "convoy_job_restarts_total{cause=\"hang\"} 0"));
}

TEST_F(MetricsExporterTest, CountersFollowCumulativeStats) {
  Coordinator::ExportSnapshot snap;
  snap.stats.attempts_started = 3;
  snap.stats.attempt_failures["signal"] = 2;
  snap.stats.restarts["signal"] = 2;
  exporter_.Update(snap);
  exporter_.Update(snap);  // the same totals again add nothing
  snap.stats.restarts["worker_lost"] = 1;
  exporter_.Update(snap);
  const std::string text = exporter_.Serialize();
  EXPECT_TRUE(Has(text, "convoy_attempts_started_total 3")) << text;
  EXPECT_TRUE(Has(text, "convoy_job_restarts_total{cause=\"signal\"} 2"));
  EXPECT_TRUE(Has(text, "convoy_job_restarts_total{cause=\"worker_lost\"} 1"));
  EXPECT_TRUE(Has(text, "convoy_attempt_failures_total{cause=\"signal\"} 2"));
}

// README "When nodes are sick": a gauge per worker for the health gate and cordons, the job's
// stragglers and each rank's step-time ratio, and the counters.
TEST_F(MetricsExporterTest, SickWorkersStragglersAndTheirCounters) {
  Coordinator::ExportSnapshot snap;
  v1::WorkerInfo ok, sick, old;
  ok.set_name("w1");
  ok.mutable_health()->set_state(v1::HEALTH_OK);
  sick.set_name("w2");
  sick.mutable_health()->set_state(v1::HEALTH_FAILING);
  sick.set_cordoned(true);
  old.set_name("w3");  // a worker without health checks
  snap.workers = {ok, sick, old};
  v1::Job job = RunningJob("j-000001", clock_.NowUnixMs());
  job.add_stragglers()->set_rank(1);
  job.set_node_moves(2);
  v1::RankStepTime* t = job.add_step_times();
  t->set_rank(1);
  t->set_ratio(3.5);
  v1::MetricRecord* m = job.add_latest();
  m->set_rank(0);
  (*m->mutable_values())["bad_steps"] = 4;
  (*m->mutable_values())["rewinds"] = 1;
  snap.active.push_back(job);
  snap.stats.bad_steps = 4;
  snap.stats.rewinds = 1;
  snap.stats.node_faults = 2;
  snap.stats.auto_cordons = 1;
  snap.stats.stragglers_named = 1;
  exporter_.Update(snap);
  const std::string text = exporter_.Serialize();
  EXPECT_TRUE(Has(text, "convoy_worker_healthy{worker=\"w1\"} 1")) << text;
  EXPECT_TRUE(Has(text, "convoy_worker_healthy{worker=\"w2\"} 0"));
  EXPECT_TRUE(Has(text, "convoy_worker_healthy{worker=\"w3\"} 1"));
  EXPECT_TRUE(Has(text, "convoy_worker_cordoned{worker=\"w2\"} 1"));
  EXPECT_TRUE(Has(text, "convoy_worker_cordoned{worker=\"w1\"} 0"));
  EXPECT_TRUE(Has(text, "convoy_job_stragglers{job_id=\"j-000001\"} 1"));
  EXPECT_TRUE(Has(text, "convoy_job_node_moves{job_id=\"j-000001\"} 2"));
  EXPECT_TRUE(Has(text, "convoy_rank_step_time_ratio{job_id=\"j-000001\",rank=\"1\"} 3.5"));
  EXPECT_TRUE(Has(text, "convoy_node_faults_total 2"));
  EXPECT_TRUE(Has(text, "convoy_worker_auto_cordons_total 1"));
  EXPECT_TRUE(Has(text, "convoy_stragglers_named_total 1"));
  EXPECT_TRUE(Has(text, "convoy_progress_hangs_total 0"));
  EXPECT_TRUE(Has(text, "convoy_job_bad_steps{job_id=\"j-000001\"} 4"));
  EXPECT_TRUE(Has(text, "convoy_job_rewinds{job_id=\"j-000001\"} 1"));
  EXPECT_TRUE(Has(text, "convoy_bad_steps_skipped_total 4"));
  EXPECT_TRUE(Has(text, "convoy_rewinds_total 1"));
  EXPECT_TRUE(Has(text, "convoy_preemptions_total{reason=\"straggler\"} 0"));
}

TEST_F(MetricsExporterTest, FinishedJobSeriesGoAfterTheRetention) {
  Coordinator::ExportSnapshot snap;
  snap.active.push_back(RunningJob("j-000001", clock_.NowUnixMs()));
  exporter_.Update(snap);
  ASSERT_TRUE(Has(exporter_.Serialize(), "convoy_rank_step{job_id=\"j-000001\""));

  snap.active.clear();  // the job finished
  exporter_.Update(snap);
  clock_.AdvanceMs(10 * 60 * 1000 - 1);
  exporter_.Update(snap);
  EXPECT_TRUE(Has(exporter_.Serialize(), "convoy_rank_step{job_id=\"j-000001\""))
      << "kept during the retention";
  clock_.AdvanceMs(1);
  exporter_.Update(snap);
  const std::string text = exporter_.Serialize();
  EXPECT_FALSE(Has(text, "j-000001")) << text;
}

TEST_F(MetricsExporterTest, AJobThatFinishedBetweenExportsShowsItsEnd) {
  Coordinator::ExportSnapshot snap;
  snap.active.push_back(RunningJob("j-000001", clock_.NowUnixMs()));
  exporter_.Update(snap);
  // It finished before the next export, after its final (eval) records.
  v1::Job done = snap.active[0];
  done.set_state(v1::SUCCEEDED);
  (*done.mutable_latest(0)->mutable_values())["test_accuracy"] = 0.9;
  snap.active.clear();
  snap.finished.push_back(done);
  exporter_.Update(snap);
  std::string text = exporter_.Serialize();
  EXPECT_TRUE(Has(text,
                  "convoy_job_info{job_id=\"j-000001\",name=\"fmnist\",owner=\"alice\","
                  "state=\"SUCCEEDED\"} 1"))
      << text;
  EXPECT_FALSE(Has(text, "state=\"RUNNING\"} 1")) << text;
  EXPECT_TRUE(Has(text, "convoy_rank_test_accuracy_ratio{job_id=\"j-000001\",rank=\"0\"} 0.9"));
  snap.finished.clear();
  clock_.AdvanceMs(10 * 60 * 1000);
  exporter_.Update(snap);
  EXPECT_FALSE(Has(exporter_.Serialize(), "j-000001"));
}

TEST_F(MetricsExporterTest, ASeriesThatNoLongerAppliesGoes) {
  Coordinator::ExportSnapshot snap;
  snap.active.push_back(RunningJob("j-000001", clock_.NowUnixMs()));
  exporter_.Update(snap);
  // Rank 0 now lags: the slowest-rank label moves.
  snap.active[0].mutable_latest(0)->set_step(90);
  exporter_.Update(snap);
  const std::string text = exporter_.Serialize();
  EXPECT_TRUE(Has(text, "convoy_job_slowest_rank{job_id=\"j-000001\",rank=\"0\"} 1")) << text;
  EXPECT_FALSE(Has(text, "convoy_job_slowest_rank{job_id=\"j-000001\",rank=\"1\"}")) << text;
}

TEST_F(MetricsExporterTest, RpcLabelsAreBoundedToKnownMethods) {
  exporter_.OnRpcDone("/convoy.v1.JobService/SubmitJob", grpc::StatusCode::OK, 0.002);
  exporter_.OnRpcDone("/convoy.v1.JobService/NoSuchMethod123", grpc::StatusCode::UNIMPLEMENTED,
                      0.001);
  const std::string text = exporter_.Serialize();
  EXPECT_TRUE(Has(text,
                  "convoy_grpc_server_handled_total{code=\"OK\",method=\"SubmitJob\",service="
                  "\"convoy.v1.JobService\"} 1"))
      << text;
  EXPECT_FALSE(Has(text, "NoSuchMethod123"));
  EXPECT_TRUE(Has(text, "method=\"unknown\""));
}

}  // namespace metrics_exporter_test
}  // namespace convoy

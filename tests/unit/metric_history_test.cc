// The metric history: bounded downsampling that keeps the whole run covered, evaluations per
// epoch, the JobManager writing it only when changed (fake clock), and its round trip
// through the in-memory and the SQLite store.
#include "coordinator/state/metric_history.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "coordinator/control/job_manager.h"
#include "coordinator/store/sqlite_job_store.h"
#include "tests/support/memory_job_store.h"
#include "tests/support/temp_dir.h"

namespace convoy {
namespace metric_history_test {

v1::MetricRecord Step(int rank, int64_t step, double loss, double rate = -1) {
  v1::MetricRecord r;
  r.set_rank(rank);
  r.set_step(step);
  r.set_has_step(true);
  r.set_epoch(static_cast<int>(step / 100));
  r.set_loss(loss);
  r.set_has_loss(true);
  r.set_kind("step");
  if (rate >= 0) (*r.mutable_values())["samples_per_s"] = rate;
  return r;
}

v1::MetricRecord Eval(int rank, int epoch, double accuracy) {
  v1::MetricRecord r;
  r.set_rank(rank);
  r.set_epoch(epoch);
  r.set_step(epoch * 100);
  r.set_has_step(true);
  r.set_kind("eval");
  (*r.mutable_values())["test_accuracy"] = accuracy;
  (*r.mutable_values())["test_loss"] = 0.4;
  return r;
}

// Steps of the points, then of `last` when set.
std::vector<int64_t> Steps(const v1::RankHistory& h) {
  std::vector<int64_t> out;
  for (const auto& p : h.points()) out.push_back(p.step());
  if (h.has_last()) out.push_back(h.last().step());
  return out;
}

TEST(MetricHistoryTest, PointsPerRankShrinkWithTheJobWithinBounds) {
  EXPECT_EQ(MetricHistory::PointsPerRank(1), 512);
  EXPECT_EQ(MetricHistory::PointsPerRank(128), 512);
  EXPECT_EQ(MetricHistory::PointsPerRank(1024), 64);
  EXPECT_EQ(MetricHistory::PointsPerRank(1'000'000), 16);
  EXPECT_EQ(MetricHistory::PointsPerRank(0), 512);
}

TEST(MetricHistoryTest, KeepsEveryRecordUntilFull) {
  MetricHistory h("j-1", 8);
  for (int s = 1; s <= 8; ++s) EXPECT_TRUE(h.Add(Step(0, s, 1.0 / s), 0));
  ASSERT_EQ(h.history().ranks_size(), 1);
  const v1::RankHistory& r = h.history().ranks(0);
  EXPECT_EQ(Steps(r), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(r.stride(), 1);
  EXPECT_EQ(r.records(), 8);
  EXPECT_FALSE(r.has_last());
}

TEST(MetricHistoryTest, StaysBoundedAndCoversTheWholeRunEvenly) {
  const int kMax = 16;
  MetricHistory h("j-1", kMax);
  const int kRecords = 10'000;
  for (int s = 0; s < kRecords; ++s) {
    h.Add(Step(0, s, 2.0 - s * 1e-4, 1000 + s), 0);
    ASSERT_LE(h.history().ranks(0).points_size(), kMax) << "after record " << s;
  }
  const v1::RankHistory& r = h.history().ranks(0);
  EXPECT_GE(r.points_size(), kMax / 2);
  EXPECT_EQ(r.records(), kRecords);
  // The kept points are records 0, stride, 2*stride, ...: evenly spread from the first.
  for (int i = 0; i < r.points_size(); ++i) EXPECT_EQ(r.points(i).step(), i * r.stride());
  // ... over the whole run, up to its very last record.
  EXPECT_GE(r.points(r.points_size() - 1).step() + r.stride(), kRecords - 1);
  ASSERT_TRUE(r.has_last());
  EXPECT_EQ(r.last().step(), kRecords - 1);
  EXPECT_TRUE(r.points(3).has_samples_per_second());
  EXPECT_DOUBLE_EQ(r.points(3).samples_per_second(), 1000 + r.points(3).step());
  EXPECT_DOUBLE_EQ(r.points(3).loss(), 2.0 - r.points(3).step() * 1e-4);
}

TEST(MetricHistoryTest, CompactionWorkIsLinearInRecords) {
  // O(1) amortised: the stride doubles each time the points fill, so compactions are
  // log(records / max) and the points moved in all stay below 2 × records.
  MetricHistory h("j-1", 512);
  for (int s = 0; s < 1'000'000; ++s) h.Add(Step(0, s, 1), 0);
  const v1::RankHistory& r = h.history().ranks(0);
  EXPECT_EQ(r.stride(), 2048);  // 1e6 / 2048 = 488 points <= 512 < 1e6 / 1024
  EXPECT_LE(r.points_size(), 512);
}

TEST(MetricHistoryTest, RanksAreIndependentAndSortedOnRead) {
  MetricHistory h("j-1", 8);
  h.Add(Step(1, 1, 0.9), 0);
  h.Add(Step(0, 1, 0.8), 0);
  h.Add(Step(1, 2, 0.7), 0);
  v1::JobMetrics sorted = h.Sorted();
  ASSERT_EQ(sorted.ranks_size(), 2);
  EXPECT_EQ(sorted.ranks(0).rank(), 0);
  EXPECT_EQ(sorted.ranks(0).points_size(), 1);
  EXPECT_EQ(sorted.ranks(1).points_size(), 2);
  EXPECT_EQ(sorted.job_id(), "j-1");
  EXPECT_EQ(sorted.max_points(), 8);
}

TEST(MetricHistoryTest, EvaluationsAreKeptOncePerEpochAndAttempt) {
  MetricHistory h("j-1", 8);
  h.Add(Step(0, 10, 0.5), 0);
  EXPECT_TRUE(h.Add(Eval(0, 0, 0.80), 0));
  EXPECT_TRUE(h.Add(Eval(0, 0, 0.81), 0));  // the same epoch again: replaces
  EXPECT_TRUE(h.Add(Eval(0, 1, 0.85), 0));
  EXPECT_TRUE(h.Add(Eval(0, 1, 0.84), 1));  // a restarted attempt redoes epoch 1
  const v1::RankHistory& r = h.history().ranks(0);
  ASSERT_EQ(r.evals_size(), 3);
  EXPECT_DOUBLE_EQ(r.evals(0).test_accuracy(), 0.81);
  EXPECT_EQ(r.evals(1).epoch(), 1);
  EXPECT_EQ(r.evals(2).attempt(), 1);
  EXPECT_TRUE(r.evals(2).has_test_loss());
  // Evaluations are not training points.
  EXPECT_EQ(r.points_size(), 1);
  // Evaluations stay bounded too.
  for (int e = 2; e < 100; ++e) h.Add(Eval(0, e, 0.9), 1);
  EXPECT_LE(h.history().ranks(0).evals_size(), 8);
  EXPECT_EQ(h.history().ranks(0).evals(0).epoch(), 0);
}

TEST(MetricHistoryTest, RecordsWithoutStepOrLossAreIgnored) {
  MetricHistory h("j-1", 8);
  v1::MetricRecord summary;
  summary.set_kind("summary");
  (*summary.mutable_values())["peak_rss_mb"] = 500;
  EXPECT_FALSE(h.Add(summary, 0));
  EXPECT_EQ(h.history().ranks_size(), 0);
}

TEST(MetricHistoryTest, ARestoredHistoryContinuesWhereItStopped) {
  MetricHistory h("j-1", 8);
  for (int s = 0; s < 20; ++s) h.Add(Step(0, s, 1), 0);
  MetricHistory again("j-1", 512);  // the stored bound wins
  again.Restore(h.history());
  for (int s = 20; s < 40; ++s) {
    h.Add(Step(0, s, 1), 0);
    again.Add(Step(0, s, 1), 0);
  }
  EXPECT_EQ(again.history().SerializeAsString(), h.history().SerializeAsString());
}

// ---- The JobManager keeps and persists the history.

class FakeChannel : public WorkerChannel {
 public:
  bool Send(const std::string&, const v1::CoordinatorMessage& msg) override {
    sent.push_back(msg);
    return true;
  }
  std::vector<v1::CoordinatorMessage> sent;
};

class JobHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override { Restart(); }

  void Restart() {
    registry_ = std::make_unique<WorkerRegistry>(clock_, 10000);
    jm_ = std::make_unique<JobManager>(clock_, store_, *registry_, channel_, options_);
    ASSERT_TRUE(jm_->Recover().ok());
  }

  // One worker with one slot, a 1×1 job on it, started.
  std::string StartJob() {
    v1::Register reg;
    reg.set_name("w1");
    reg.set_address("10.0.0.1");
    reg.set_cores(1);
    reg.set_slots(1);
    jm_->OnRegister(reg);
    v1::JobSpec spec;
    spec.set_name("job");
    spec.set_nodes(1);
    spec.set_procs_per_node(1);
    spec.add_command("train");
    auto id = jm_->Submit(spec);
    EXPECT_TRUE(id.ok());
    v1::WorkerMessage port;
    port.mutable_port_reserved()->set_job_id(*id);
    port.mutable_port_reserved()->set_port(40000);
    jm_->OnWorkerMessage("w1", port);
    v1::WorkerMessage started;
    started.mutable_process_started()->set_job_id(*id);
    started.mutable_process_started()->set_pid(100);
    jm_->OnWorkerMessage("w1", started);
    EXPECT_EQ(jm_->Get(*id)->state(), v1::RUNNING);
    return *id;
  }

  void Send(const std::string& id, const v1::MetricRecord& rec) {
    v1::WorkerMessage msg;
    msg.mutable_metrics()->set_job_id(id);
    *msg.mutable_metrics()->add_records() = rec;
    jm_->OnWorkerMessage("w1", msg);
  }

  FakeClock clock_;
  MemoryJobStore store_;
  FakeChannel channel_;
  JobManagerOptions options_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<JobManager> jm_;
};

TEST_F(JobHistoryTest, WrittenOnlyWhenChangedAtMostOncePerIntervalAndAtOnceAtTheEnd) {
  const std::string id = StartJob();
  jm_->Tick();
  EXPECT_EQ(store_.job_metrics_writes(), 0);  // nothing reported yet: nothing written
  Send(id, Step(0, 1, 0.9));
  jm_->Tick();
  EXPECT_EQ(store_.job_metrics_writes(), 1);  // first change: written at the next tick
  Send(id, Step(0, 2, 0.8));
  jm_->Tick();
  clock_.AdvanceMs(options_.history_save_interval_ms - 1);
  jm_->Tick();
  EXPECT_EQ(store_.job_metrics_writes(), 1);  // changed, but within the interval
  clock_.AdvanceMs(1);
  jm_->Tick();
  EXPECT_EQ(store_.job_metrics_writes(), 2);
  clock_.AdvanceMs(options_.history_save_interval_ms * 3);
  jm_->Tick();
  EXPECT_EQ(store_.job_metrics_writes(), 2);  // unchanged: not written again
  v1::WorkerMessage hb;  // heartbeat records keep a rank alive but are no history
  v1::MetricRecord beat;
  beat.set_kind("heartbeat");
  Send(id, beat);
  jm_->Tick();
  EXPECT_EQ(store_.job_metrics_writes(), 2);

  // The last records and the end of the job: written with the final transition, at once.
  Send(id, Step(0, 3, 0.7));
  Send(id, Eval(0, 0, 0.83));
  v1::WorkerMessage exited;
  exited.mutable_process_exited()->set_job_id(id);
  jm_->OnWorkerMessage("w1", exited);
  jm_->Tick();
  ASSERT_EQ(jm_->Get(id)->state(), v1::SUCCEEDED);
  EXPECT_EQ(store_.job_metrics_writes(), 3);

  // After a restart the history is back, whole.
  const std::string before = jm_->GetMetrics(id)->SerializeAsString();
  Restart();
  auto after = jm_->GetMetrics(id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->SerializeAsString(), before);
  ASSERT_EQ(after->ranks_size(), 1);
  EXPECT_EQ(Steps(after->ranks(0)), (std::vector<int64_t>{1, 2, 3}));
  ASSERT_EQ(after->ranks(0).evals_size(), 1);
  EXPECT_DOUBLE_EQ(after->ranks(0).evals(0).test_accuracy(), 0.83);
  EXPECT_EQ(jm_->GetMetrics("j-999999").status().code(), StatusCode::kNotFound);
}

TEST(SqliteJobMetricsTest, RoundTripKeepsTheLastWriteOfEachJob) {
  testing::TempDir dir("convoy-history");
  MetricHistory a("j-000001", 8), b("j-000002", 8);
  for (int s = 0; s < 30; ++s) a.Add(Step(s % 2, s, 1.0 / (s + 1), 100), 0);
  b.Add(Eval(0, 0, 0.5), 0);
  {
    auto store = SqliteJobStore::Open(dir / "state.db");
    ASSERT_TRUE(store.ok()) << store.status().message();
    std::vector<StoreWrite> writes(3);
    MetricHistory early("j-000001", 8);
    early.Add(Step(0, 0, 1), 0);
    writes[0].job_metrics = early.history();  // replaced by the later write of the batch
    writes[1].job_metrics = a.history();
    writes[2].job_metrics = b.history();
    ASSERT_TRUE((*store)->Write(writes).ok());
  }
  auto store = SqliteJobStore::Open(dir / "state.db");
  ASSERT_TRUE(store.ok());
  auto loaded = (*store)->LoadJobMetrics();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->size(), 2u);
  EXPECT_EQ((*loaded)[0].SerializeAsString(), a.history().SerializeAsString());
  EXPECT_EQ((*loaded)[1].SerializeAsString(), b.history().SerializeAsString());
  ASSERT_TRUE((*store)->SaveJobMetrics(b.history()).ok());  // replaces, no duplicate
  EXPECT_EQ((*store)->LoadJobMetrics()->size(), 2u);
}

}  // namespace metric_history_test
}  // namespace convoy

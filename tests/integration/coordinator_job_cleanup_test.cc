// Deleting jobs and retention through the whole stack: the real gRPC server and store (SQLite,
// and etcd on a real member) of the in-process test cluster, and real in-process workers running
// real processes. A deleted job leaves no row in the state database and no file on the workers
// (nothing is followed through a symlink a rank planted); a worker that was away is told when it is
// back, also after a coordinator restart; retention (a fake clock on the coordinator, and
// on the worker's attempt-directory sweep) removes the same, and `logs` then says why.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/job_paths.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/test_cluster.h"
#include "worker/files/attempt_dir_retention.h"
#include "worker/supervise/supervisor.h"

namespace convoy {
namespace coordinator_job_cleanup_test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
constexpr int64_t kDay = 86'400'000;

// A job whose rank writes a log line, a checkpoint, a metric record, and plants a symlink
// to `victim` in its job directory.
v1::JobSpec Spec(const std::string& victim) {
  v1::JobSpec spec;
  spec.set_name("tidy");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("/bin/sh");
  spec.add_command("-c");
  spec.add_command(
      "echo hello from the rank; echo ckpt > \"$CONVOY_CHECKPOINT_DIR/last.pt\"; "
      "ln -s \"$VICTIM\" escape; ln -s \"$VICTIM/keep\" escape-file");
  (*spec.mutable_env())["VICTIM"] = victim;
  return spec;
}

grpc::Status Delete(testing::TestCluster& cluster, const std::string& id,
                    v1::DeleteJobResponse* resp) {
  grpc::ClientContext ctx;
  v1::DeleteJobRequest req;
  req.set_job_id(id);
  return cluster.jobs().DeleteJob(&ctx, req, resp);
}

grpc::Status Logs(testing::TestCluster& cluster, const std::string& id, std::string* out) {
  grpc::ClientContext ctx;
  v1::GetLogsRequest req;
  req.set_job_id(id);
  auto reader = cluster.jobs().GetLogs(&ctx, req);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) *out += chunk.data();
  return reader->Finish();
}

// On either store ("sqlite", "etcd").
class JobCleanupTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "etcd" && !testing::EtcdCluster::Available()) {
      GTEST_SKIP() << "etcd is not installed (etcd-server)";
    }
    auto options = testing::TestCluster::DefaultOptions();
    options.etcd = GetParam() == "etcd";
    cluster_ = std::make_unique<testing::TestCluster>(options);
    victim_ = (cluster_->dir().path() / "victim").string();
    fs::create_directories(victim_);
    std::ofstream(victim_ + "/keep") << "not the job's\n";
  }
  std::string RunJob(testing::InProcessWorker& w) {
    const std::string id = cluster_->Submit(Spec(victim_));
    EXPECT_TRUE(cluster_->WaitForState(id, v1::SUCCEEDED)) << cluster_->GetJob(id).message();
    // Named by the job's id and uid (JobDirName), never the id alone.
    name_ = JobDirName(id, cluster_->GetJob(id).uid());
    attempt_dir_ = w.work_dir() + "/jobs/" + name_ + "/attempt-0";
    job_dir_ = w.job_root() + "/" + name_;
    EXPECT_TRUE(fs::exists(attempt_dir_ + "/rank-0.log"));
    EXPECT_TRUE(fs::exists(job_dir_ + "/checkpoints/last.pt"));
    EXPECT_TRUE(fs::is_symlink(job_dir_ + "/escape"));
    EXPECT_GT(cluster_->StoredRecordsOf(id), 0);
    return id;
  }
  void ExpectGone(testing::InProcessWorker& w, const std::string& id) {
    EXPECT_TRUE(testing::TestCluster::WaitFor(
        [&] { return !fs::exists(job_dir_) && !fs::exists(w.work_dir() + "/jobs/" + name_); }, 30s))
        << "files of " << id << " are still on the worker";
    EXPECT_TRUE(
        testing::TestCluster::WaitFor([&] { return cluster_->StoredRecordsOf(id) == 0; }, 30s))
        << "rows of " << id << " are still in the store";
    // Not followed: what the symlinks pointed at is intact.
    EXPECT_TRUE(fs::exists(victim_ + "/keep"));
  }

  std::unique_ptr<testing::TestCluster> cluster_;
  std::string victim_, name_, attempt_dir_, job_dir_;
};

TEST_P(JobCleanupTest, DeleteRemovesRowsAndWorkerFilesNeverThroughASymlink) {
  testing::InProcessWorker& w1 = cluster_->StartWorker("w1");
  const std::string id = RunJob(w1);
  v1::DeleteJobResponse resp;
  grpc::Status st = Delete(*cluster_, id, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.job_id(), id);
  ASSERT_EQ(resp.workers_size(), 1);
  EXPECT_EQ(resp.workers(0), "w1");
  // Durable before the answer: the job's own rows are gone at once.
  // Only the pending file removal may be left (the worker may have acknowledged it already).
  EXPECT_EQ(cluster_->StoredRecordsOf(id, /*with_file_deletion=*/false), 0);
  EXPECT_LE(cluster_->StoredRecordsOf(id), 1);
  ExpectGone(w1, id);
  EXPECT_EQ(Delete(*cluster_, id, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_P(JobCleanupTest, AWorkerThatWasAwayRemovesTheFilesWhenBackAfterACoordinatorRestart) {
  testing::InProcessWorker& w1 = cluster_->StartWorker("w1");
  const std::string id = RunJob(w1);
  // The coordinator goes away; the worker keeps running and reconnects to the new one.
  cluster_->StopCoordinator();
  cluster_->StartCoordinator();
  // Deleted before the worker is back (it reconnects with backoff).
  v1::DeleteJobResponse resp;
  grpc::Status st = Delete(*cluster_, id, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.workers(0), "w1");
  ExpectGone(w1, id);
}

INSTANTIATE_TEST_SUITE_P(BothStores, JobCleanupTest, ::testing::Values("sqlite", "etcd"),
                         [](const auto& info) { return info.param; });

class JobRetentionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(JobRetentionTest, AFakeClockExpiresTheJobRowsAndFilesAndTheWorkersLogs) {
  if (GetParam() == "etcd" && !testing::EtcdCluster::Available()) {
    GTEST_SKIP() << "etcd is not installed (etcd-server)";
  }
  FakeClock clock(SystemClock().NowUnixMs());
  auto options = testing::TestCluster::DefaultOptions();
  options.etcd = GetParam() == "etcd";
  options.clock = &clock;
  options.flags.job_retention = "30d";  // --job-retention 30d
  options.flags.job_retention_ms = 30 * kDay;
  testing::TestCluster cluster(options);
  const std::string victim = (cluster.dir().path() / "victim").string();
  fs::create_directories(victim);
  std::ofstream(victim + "/keep") << "not the job's\n";
  testing::InProcessWorker& w1 = cluster.StartWorker("w1");
  const std::string id = cluster.Submit(Spec(victim));
  ASSERT_TRUE(cluster.WaitForState(id, v1::SUCCEEDED)) << cluster.GetJob(id).message();
  const std::string name = JobDirName(id, cluster.GetJob(id).uid());
  const std::string attempt_dir = w1.work_dir() + "/jobs/" + name + "/attempt-0";
  const std::string job_dir = w1.job_root() + "/" + name;
  std::string log;
  ASSERT_TRUE(Logs(cluster, id, &log).ok());
  EXPECT_EQ(log, "hello from the rank\n");

  // The worker's sweep (--attempt-dir-retention 7d), 8 days on: the attempt directory
  // goes, the job directory stays, and `logs` says why there is nothing.
  FakeClock worker_clock(SystemClock().NowUnixMs());
  AttemptDirRetention sweep(w1.work_dir(), 7 * kDay, worker_clock, [&w1] {
    std::set<std::pair<std::string, int>> running;
    for (const auto& r : w1.supervisor().RankSamples()) {
      if (r.running) running.insert({r.job_id, r.attempt});
    }
    return running;
  });
  EXPECT_EQ(sweep.Sweep(), 0);  // not old yet
  worker_clock.AdvanceMs(8 * kDay);
  EXPECT_EQ(sweep.Sweep(), 1);
  EXPECT_FALSE(fs::exists(attempt_dir));
  EXPECT_TRUE(fs::exists(job_dir + "/checkpoints/last.pt"));
  log.clear();
  grpc::Status st = Logs(cluster, id, &log);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("were removed from worker w1"), std::string::npos)
      << st.error_message();

  // The coordinator's retention (30 days), 31 days on: rows and every file go.
  EXPECT_GT(cluster.StoredRecordsOf(id), 0);
  clock.AdvanceMs(31 * kDay);
  EXPECT_TRUE(testing::TestCluster::WaitFor([&] { return cluster.StoredRecordsOf(id) == 0; }, 30s));
  EXPECT_TRUE(testing::TestCluster::WaitFor(
      [&] { return !fs::exists(job_dir) && !fs::exists(w1.work_dir() + "/jobs/" + name); }, 30s));
  EXPECT_TRUE(fs::exists(victim + "/keep"));
  grpc::ClientContext ctx;
  v1::GetJobRequest get;
  get.set_job_id(id);
  v1::Job job;
  EXPECT_EQ(cluster.jobs().GetJob(&ctx, get, &job).error_code(), grpc::StatusCode::NOT_FOUND);
}

INSTANTIATE_TEST_SUITE_P(BothStores, JobRetentionTest, ::testing::Values("sqlite", "etcd"),
                         [](const auto& info) { return info.param; });

}  // namespace coordinator_job_cleanup_test
}  // namespace convoy

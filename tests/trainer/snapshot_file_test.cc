// Snapshot files (trainer/snapshot_file.h): whole files only, the newest two kept, and a
// corrupt, truncated or another job's file is skipped for an older good one. The snapshotter
// (trainer/snapshotter.h) never lets the newest file fall more than kMaxBehind + 1 intervals
// behind, however starved its background writer.
#include "trainer/snapshot_file.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "trainer/snapshotter.h"

namespace convoy::trainer {
namespace snapshot_file_test {

namespace fs = std::filesystem;

class SnapshotFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy-snap-" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  SnapshotMeta Meta(int64_t step) {
    SnapshotMeta m;
    m.job = "j-000007";
    m.model = "fmnist-cnn";
    m.seed = 1234;
    m.samples = 60000;
    m.step = step;
    m.epoch = step / 100;
    m.sample = step % 100 * 64;
    return m;
  }
  fs::path dir_;
};

TEST_F(SnapshotFileTest, WritesReadsAndKeepsTheNewestTwo) {
  for (int64_t step : {10, 20, 30}) {
    const std::string path =
        WriteSnapshotFile(dir_.string(), Meta(step), "payload of " + std::to_string(step));
    EXPECT_EQ(path, SnapshotPath(dir_.string(), step));
  }
  EXPECT_FALSE(fs::exists(SnapshotPath(dir_.string(), 10)));
  EXPECT_TRUE(fs::exists(SnapshotPath(dir_.string(), 20)));
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all);
  auto found = ReadNewestSnapshot(dir_.string(), Meta(0));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->meta.step, 30);
  EXPECT_EQ(found->meta.sample, 30 * 64);
  EXPECT_EQ(found->payload, "payload of 30");
  EXPECT_EQ(found->path, SnapshotPath(dir_.string(), 30));
  // Nothing else is left in the directory (no temporaries).
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 2);
}

TEST_F(SnapshotFileTest, AFoundSnapshotKeepsItsBytesWhileItsFileIsReplacedAndPruned) {
  WriteSnapshotFile(dir_.string(), Meta(30), "the first payload of 30");
  auto found = ReadNewestSnapshot(dir_.string(), Meta(0));
  ASSERT_TRUE(found.has_value());
  // Another writer of step 30 (a last will beside the periodic writer) renames over the file,
  // then newer snapshots prune it: the mapping still holds what was checked.
  WriteSnapshotFile(dir_.string(), Meta(30), "the other payload of 30, longer");
  WriteSnapshotFile(dir_.string(), Meta(40), "40");
  WriteSnapshotFile(dir_.string(), Meta(50), "50");
  ASSERT_FALSE(fs::exists(SnapshotPath(dir_.string(), 30)));
  EXPECT_EQ(found->payload, "the first payload of 30");
  EXPECT_EQ(ReadNewestSnapshot(dir_.string(), Meta(0))->payload, "50");
}

TEST_F(SnapshotFileTest, CorruptTruncatedAndForeignFilesAreSkipped) {
  WriteSnapshotFile(dir_.string(), Meta(20), std::string(1000, 'a'));
  // Newer but damaged: one payload byte flipped.
  const std::string p30 = WriteSnapshotFile(dir_.string(), Meta(30), std::string(1000, 'b'), 5);
  {
    std::fstream f(p30, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('c');
  }
  // Newer but truncated.
  const std::string p40 = WriteSnapshotFile(dir_.string(), Meta(40), std::string(1000, 'd'), 5);
  fs::resize_file(p40, fs::file_size(p40) - 1);
  // Newer but another job's, and another seed's.
  SnapshotMeta other = Meta(50);
  other.job = "j-000008";
  WriteSnapshotFile(dir_.string(), other, "x", 5);
  SnapshotMeta seed = Meta(60);
  seed.seed = 1;
  WriteSnapshotFile(dir_.string(), seed, "x", 5);
  // Garbage with a snapshot's name.
  { std::ofstream(SnapshotPath(dir_.string(), 70)) << "garbage"; }
  testing::internal::CaptureStderr();
  auto found = ReadNewestSnapshot(dir_.string(), Meta(0));
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->meta.step, 20);
  EXPECT_NE(err.find("snap-000000000070.bin: not a snapshot"), std::string::npos) << err;
  EXPECT_NE(err.find("snap-000000000060.bin: another job's or run's"), std::string::npos) << err;
  EXPECT_NE(err.find("snap-000000000050.bin: another job's or run's"), std::string::npos) << err;
  EXPECT_NE(err.find("snap-000000000040.bin: truncated"), std::string::npos) << err;
  EXPECT_NE(err.find("snap-000000000030.bin: checksum mismatch"), std::string::npos) << err;
}

// Job ids repeat across clusters: j-000007 of another cluster, or of another job uid, or of a
// version without uids, is not this job's, even with the same model, seed and data set.
TEST_F(SnapshotFileTest, AnotherIdentitysSnapshotIsNeverResumed) {
  const std::string kMine = "0123456789abcdef0123456789abcdef";
  const std::string kCluster = "fedcba9876543210fedcba9876543210";
  SnapshotMeta mine = Meta(20);
  mine.job_uid = kMine;
  mine.cluster_id = kCluster;
  WriteSnapshotFile(dir_.string(), mine, "mine", 5);
  SnapshotMeta other_job = mine;
  other_job.step = 30;
  other_job.job_uid = "11111111111111111111111111111111";
  WriteSnapshotFile(dir_.string(), other_job, "other job", 5);
  SnapshotMeta other_cluster = mine;
  other_cluster.step = 40;
  other_cluster.cluster_id = "22222222222222222222222222222222";
  WriteSnapshotFile(dir_.string(), other_cluster, "other cluster", 5);
  WriteSnapshotFile(dir_.string(), Meta(50), "no identity", 5);  // an older version's

  SnapshotMeta want = Meta(0);
  want.job_uid = kMine;
  want.cluster_id = kCluster;
  testing::internal::CaptureStderr();
  auto found = ReadNewestSnapshot(dir_.string(), want);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->meta.step, 20);
  EXPECT_EQ(found->payload, "mine");
  EXPECT_EQ(found->meta.job_uid, kMine);
  EXPECT_EQ(found->meta.cluster_id, kCluster);
  EXPECT_NE(err.find("not resuming from " + SnapshotPath(dir_.string(), 30) +
                     ": it belongs to job 11111111111111111111111111111111 of cluster " + kCluster +
                     ", not this job (" + kMine + " of cluster " + kCluster + ")"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("snap-000000000040.bin: it belongs to job " + kMine +
                     " of cluster 22222222222222222222222222222222"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("snap-000000000050.bin: it has no job identity"), std::string::npos) << err;

  // A run without a uid (the trainer by hand) takes the newest of the same model and seed.
  auto by_hand = ReadNewestSnapshot(dir_.string(), Meta(0));
  ASSERT_TRUE(by_hand.has_value());
  EXPECT_EQ(by_hand->meta.step, 50);
}

TEST_F(SnapshotFileTest, TemporariesOfDeadWritersAreRemoved) {
  fs::create_directories(dir_);
  // A writer that died mid-write (pid 0 is never a live writer) and a live one (us).
  { std::ofstream(dir_ / ".snap-5.999999999.tmp") << "partial"; }
  const std::string live = ".snap-6." + std::to_string(getpid()) + ".tmp";
  { std::ofstream(dir_ / live) << "partial"; }
  WriteSnapshotFile(dir_.string(), Meta(7), "p");
  EXPECT_FALSE(fs::exists(dir_ / ".snap-5.999999999.tmp"));
  EXPECT_TRUE(fs::exists(dir_ / live));
  EXPECT_FALSE(ReadNewestSnapshot((dir_ / "missing").string(), Meta(0)).has_value());
}

// A host without an idle core starves the writer (nice 19) for seconds. Here its first write
// is 32 MB (a 2048 x 2048 layer and its momentum), and the next captures come at once: two
// find it busy and are skipped, the third is written by the caller before it returns, while
// the first may still be in flight. Without this a restart lost every step since the writer's
// last file (measured: 22 s for one write, 32 captures skipped in a 100-step run).
TEST_F(SnapshotFileTest, AStarvedWriterIsOvertakenByTheTrainingThreadAfterTwoSkips) {
  const auto make = [] {
    Snapshotter::Shadow s;
    auto m = std::make_shared<torch::nn::LinearImpl>(2048, 2048);
    s.optimizer = std::make_unique<torch::optim::SGD>(m->parameters(),
                                                      torch::optim::SGDOptions(0.1).momentum(0.9));
    s.model = m;
    return s;
  };
  Snapshotter::Shadow live = make();
  {
    // One step, so that the optimiser holds its momentum buffers.
    auto* linear = dynamic_cast<torch::nn::LinearImpl*>(live.model.get());
    ASSERT_NE(linear, nullptr);
    linear->forward(torch::ones({1, 2048})).sum().backward();
    live.optimizer->step();
  }
  const StateIdentity id{1234, 60000, "", ""};
  Snapshotter snap(dir_.string(), Meta(0), id, *live.model, *live.optimizer, make);
  const std::vector<uint8_t> counts(60000, 0);
  const auto at = [](int64_t step) { return Position{step / 100, step % 100 * 64, step}; };
  ASSERT_TRUE(snap.Capture(at(10), counts));  // to the background writer
  EXPECT_FALSE(snap.Capture(at(20), counts));
  EXPECT_FALSE(snap.Capture(at(30), counts));
  EXPECT_TRUE(snap.Capture(at(40), counts));  // the writer is still at step 10: written now
  EXPECT_TRUE(fs::exists(SnapshotPath(dir_.string(), 40)));
  snap.Flush();
  const Snapshotter::Stats st = snap.stats();
  EXPECT_EQ(st.captures, 1);
  EXPECT_EQ(st.written, 1);
  EXPECT_EQ(st.skipped_busy, 2);
  EXPECT_EQ(st.written_inline, 1);
  EXPECT_EQ(st.last_error, "");
  // The late write of step 10 does not hide step 40: the newest valid file is 40's.
  auto found = ReadNewestSnapshot(dir_.string(), Meta(0));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->meta.step, 40);
  // The writer free again, the next capture goes to it as before.
  EXPECT_TRUE(snap.Capture(at(50), counts));
  snap.Flush();
  EXPECT_EQ(snap.stats().written, 2);
  EXPECT_EQ(snap.stats().written_inline, 1);
}

}  // namespace snapshot_file_test
}  // namespace convoy::trainer

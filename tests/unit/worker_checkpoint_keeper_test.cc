// Checkpoints kept by policy on the worker (worker/files/checkpoint_keeper.h): the policy
// applied to real files, the manifest, and deletions that a kill -9 interrupts at each step
// (a real child process killed with SIGKILL while paused between two steps, and the on-disk
// state each step leaves) finished by the next run.
#include "worker/files/checkpoint_keeper.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/job_paths.h"
#include "common/rank_contract.h"
#include "tests/support/temp_dir.h"
#include "worker/exec/metrics_parse.h"

namespace convoy {
namespace worker_checkpoint_keeper_test {

namespace fs = std::filesystem;

constexpr const char* kId = "j-000007";
constexpr const char* kUid = "0123456789abcdef0123456789abcdef";

class CheckpointKeeperTest : public ::testing::Test {
 protected:
  CheckpointKeeperTest() {
    root_ = fs::canonical(tmp_.path()).string();
    jobs_ = root_ + "/work/jobs";
    fs::create_directories(jobs_ + "/" + JobDirName(kId, kUid));
    ckpt_ = root_ + "/job-root/" + JobDirName(kId, kUid) + "/checkpoints";
    fs::create_directories(ckpt_);
    job_.job_id = kId;
    job_.job_uid = kUid;
    job_.checkpoint_dir = ckpt_;
    job_.policy.set_keep_last(2);
    job_.policy.mutable_keep_best()->set_metric("test_accuracy");
    job_.policy.mutable_keep_best()->set_goal("max");
    job_.policy.mutable_keep_best()->set_count(1);
  }

  static std::string Name(int step) {
    char name[64];
    std::snprintf(name, sizeof(name), "ckpt-%012d.pt", step);
    return name;
  }

  // Writes checkpoint `i` (step 100 * i) with its accuracy and returns its record.
  v1::MetricRecord Write(int i, double accuracy) {
    const std::string name = Name(100 * i);
    std::ofstream(ckpt_ + "/" + name) << "state of step " << 100 * i;
    auto rec = ParseMetricLine("{\"kind\":\"checkpoint\",\"step\":" + std::to_string(100 * i) +
                               ",\"loss\":0.5,\"test_accuracy\":" + std::to_string(accuracy) +
                               ",\"checkpoint_path\":\"" + name + "\"}");
    EXPECT_TRUE(rec.ok());
    return *rec;
  }

  // The accuracy of checkpoint i of ten: rising to i = 5 (0.90), then falling.
  static double Accuracy(int i) {
    const double acc[] = {0, 0.50, 0.60, 0.70, 0.80, 0.90, 0.85, 0.84, 0.83, 0.82, 0.81};
    return acc[i];
  }

  std::set<std::string> Files() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(ckpt_)) out.insert(e.path().filename().string());
    return out;
  }

  // What a reader that wants whole checkpoints (the trainer's scan) takes.
  std::set<std::string> Checkpoints() const {
    std::set<std::string> out;
    for (const std::string& f : Files()) {
      if (rank_contract::IsCheckpointName(f)) out.insert(f);
    }
    return out;
  }

  testing::TempDir tmp_{"convoy-keeper"};
  std::string root_, jobs_, ckpt_;
  CheckpointKeeper::Job job_;
};

TEST_F(CheckpointKeeperTest, ParseMetricLineTakesTheCheckpointPath) {
  auto rec = ParseMetricLine(R"({"kind":"checkpoint","step":7,"checkpoint_path":"a.pt"})");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->checkpoint_path(), "a.pt");
  EXPECT_EQ(rec->kind(), "checkpoint");
  auto longer = ParseMetricLine("{\"checkpoint_path\":\"" + std::string(300, 'a') + "\"}");
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(longer->checkpoint_path(), "");  // dropped whole, never cut to another name
  auto number = ParseMetricLine(R"({"checkpoint_path":3})");
  ASSERT_TRUE(number.ok());
  EXPECT_EQ(number->checkpoint_path(), "");
}

TEST_F(CheckpointKeeperTest, TenCheckpointsKeepLastTwoAndBestOne) {
  CheckpointKeeper keeper(jobs_, "w1");
  v1::CheckpointsKept kept;
  for (int i = 1; i <= 10; ++i) {
    auto k = keeper.Record(job_, i <= 6 ? 0 : 1, Write(i, Accuracy(i)), 1000 + i);
    ASSERT_TRUE(k.ok()) << k.status().message();
    kept = *k;
    EXPECT_LE(Checkpoints().size(), 3u) << "after checkpoint " << i;
  }
  EXPECT_EQ(Files(), (std::set<std::string>{Name(500), Name(900), Name(1000)}));
  ASSERT_EQ(kept.checkpoints_size(), 3);
  EXPECT_EQ(kept.job_id(), kId);
  EXPECT_EQ(kept.job_uid(), kUid);
  EXPECT_EQ(kept.checkpoints(0).path(), Name(1000));  // newest first
  EXPECT_EQ(kept.checkpoints(0).kept_as(0), "last");
  EXPECT_EQ(kept.checkpoints(0).attempt(), 1);
  EXPECT_EQ(kept.checkpoints(0).worker(), "w1");
  EXPECT_EQ(kept.checkpoints(1).path(), Name(900));
  EXPECT_EQ(kept.checkpoints(2).path(), Name(500));
  EXPECT_EQ(kept.checkpoints(2).step(), 500);
  EXPECT_EQ(kept.checkpoints(2).kept_as(0), "best");
  EXPECT_DOUBLE_EQ(kept.checkpoints(2).metrics().at("test_accuracy"), 0.9);
  EXPECT_DOUBLE_EQ(kept.checkpoints(2).metrics().at("loss"), 0.5);
  // The manifest says the same, with no deletion under way, in the worker's own directory.
  auto m = ReadManifest(keeper.ManifestPath(kId, kUid));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->kept.size(), 3u);
  EXPECT_TRUE(m->deleting.empty());
  EXPECT_EQ(keeper.ManifestPath(kId, kUid),
            jobs_ + "/" + JobDirName(kId, kUid) + "/checkpoints.json");
}

TEST_F(CheckpointKeeperTest, ThePolicySurvivesARestartOfTheWorker) {
  {
    CheckpointKeeper first(jobs_, "w1");
    for (int i = 1; i <= 5; ++i) ASSERT_TRUE(first.Record(job_, 0, Write(i, Accuracy(i)), i).ok());
  }
  CheckpointKeeper second(jobs_, "w1");
  EXPECT_EQ(second.RecoverAll().at(0).checkpoints_size(), 2);  // 500 (best and last), 400
  for (int i = 6; i <= 10; ++i) ASSERT_TRUE(second.Record(job_, 2, Write(i, Accuracy(i)), i).ok());
  EXPECT_EQ(Files(), (std::set<std::string>{Name(500), Name(900), Name(1000)}));
}

TEST_F(CheckpointKeeperTest, ARecordThatNamesNoCheckpointChangesNothing) {
  CheckpointKeeper keeper(jobs_, "w1");
  ASSERT_TRUE(keeper.Record(job_, 0, Write(1, 0.5), 1).ok());
  const std::vector<std::string> bad_paths = {
      "../x", ".hidden", "a/b", "..", "missing.pt", std::string(kDeletingPrefix) + Name(100)};
  for (const std::string& bad : bad_paths) {
    v1::MetricRecord rec;
    rec.set_kind("checkpoint");
    rec.set_checkpoint_path(bad);
    auto k = keeper.Record(job_, 0, rec, 2);
    EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(Files(), (std::set<std::string>{Name(100)}));
  // A checkpoint directory that became a symlink (the job's own user can do that) is not
  // followed: nothing there is deleted.
  const std::string elsewhere = root_ + "/elsewhere";
  fs::create_directories(elsewhere);
  std::ofstream(elsewhere + "/" + Name(200)) << "x";
  fs::rename(ckpt_, root_ + "/moved");
  fs::create_directory_symlink(elsewhere, ckpt_);
  auto k = keeper.Record(job_, 0, Write(2, 0.1), 3);  // written through the link
  EXPECT_FALSE(k.ok());
  EXPECT_TRUE(fs::exists(elsewhere + "/" + Name(200)));
}

// The on-disk state a kill leaves after each step, finished when the worker starts again.
TEST_F(CheckpointKeeperTest, ADeletionInterruptedAtAnyStepIsFinishedOnRestart) {
  for (int step = 1; step <= 4; ++step) {
    SCOPED_TRACE("killed after step " + std::to_string(step));
    fs::remove_all(jobs_ + "/" + JobDirName(kId, kUid) + "/checkpoints.json");
    fs::remove_all(ckpt_);
    fs::create_directories(ckpt_);
    CheckpointKeeper keeper(jobs_, "w1");
    job_.policy.set_keep_last(1);
    job_.policy.clear_keep_best();
    ASSERT_TRUE(keeper.Record(job_, 0, Write(1, 0.5), 1).ok());
    const std::string path = keeper.ManifestPath(kId, kUid);
    auto m = ReadManifest(path);
    ASSERT_TRUE(m.ok());
    // Checkpoint 2 arrives; the policy drops checkpoint 1. 1. intent:
    std::ofstream(ckpt_ + "/" + Name(200)) << "state";
    m->kept[0] = {Name(200), 200, 0, 2, 1, {}};
    m->deleting = {Name(100)};
    ASSERT_TRUE(WriteManifest(path, *m).ok());
    const std::string victim = ckpt_ + "/" + Name(100);
    const std::string hidden = ckpt_ + "/" + kDeletingPrefix + Name(100);
    if (step >= 2) fs::rename(victim, hidden);  // 2. hidden
    if (step == 3) {                            // 3. half removed: a directory checkpoint
      fs::remove(hidden);
      fs::create_directories(hidden + "/shard");
      std::ofstream(hidden + "/shard/part-1") << "x";
    }
    if (step >= 4) fs::remove(hidden);  // 3. removed; 4. not written
    // A reader sees only whole checkpoints at every step.
    const std::set<std::string> whole = Checkpoints();
    EXPECT_TRUE(whole.count(Name(200)));
    EXPECT_EQ(whole.size(), step == 1 ? 2u : 1u);

    CheckpointKeeper restarted(jobs_, "w1");
    auto all = restarted.RecoverAll();
    ASSERT_EQ(all.size(), 1u);
    ASSERT_EQ(all[0].checkpoints_size(), 1);
    EXPECT_EQ(all[0].checkpoints(0).path(), Name(200));
    EXPECT_EQ(Files(), (std::set<std::string>{Name(200)}));
    auto after = ReadManifest(path);
    ASSERT_TRUE(after.ok());
    EXPECT_TRUE(after->deleting.empty());
  }
}

// A real process killed with SIGKILL while it pauses between two steps of a deletion: the
// next keeper finishes it, and what a reader saw in between was never half a checkpoint.
TEST_F(CheckpointKeeperTest, AKeeperKilledMidDeletionIsFinishedByTheNext) {
  for (CheckpointKeeper::Step at :
       {CheckpointKeeper::Step::kIntent, CheckpointKeeper::Step::kHidden}) {
    SCOPED_TRACE(at == CheckpointKeeper::Step::kIntent ? "after the intent" : "after the rename");
    fs::remove_all(jobs_ + "/" + JobDirName(kId, kUid) + "/checkpoints.json");
    fs::remove_all(ckpt_);
    fs::create_directories(ckpt_);
    {
      CheckpointKeeper keeper(jobs_, "w1");
      for (int i = 1; i <= 9; ++i)
        ASSERT_TRUE(keeper.Record(job_, 0, Write(i, Accuracy(i)), i).ok());
    }
    // Kept: 500 (best), 800 and 900 (last). Checkpoint 10 drops 800.
    const v1::MetricRecord tenth = Write(10, Accuracy(10));
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(ready[0]);
      CheckpointKeeper keeper(jobs_, "w1");
      keeper.SetStepHook([&](CheckpointKeeper::Step step, const std::string&) {
        if (step != at) return;
        char c = 'p';
        (void)!write(ready[1], &c, 1);
        for (;;) pause();  // killed here
      });
      keeper.Record(job_, 1, tenth, 10);
      _exit(3);  // never: the hook pauses first
    }
    close(ready[1]);
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    close(ready[0]);
    // Paused between two steps: a reader sees whole checkpoints only.
    const std::set<std::string> whole = Checkpoints();
    EXPECT_TRUE(whole.count(Name(1000)) && whole.count(Name(900)) && whole.count(Name(500)));
    EXPECT_EQ(whole.count(Name(800)), at == CheckpointKeeper::Step::kIntent ? 1u : 0u);
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    auto left = ReadManifest(jobs_ + "/" + JobDirName(kId, kUid) + "/checkpoints.json");
    ASSERT_TRUE(left.ok());
    EXPECT_EQ(left->deleting, std::vector<std::string>{Name(800)});  // the intent survived

    CheckpointKeeper restarted(jobs_, "w1");
    auto all = restarted.RecoverAll();
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].checkpoints_size(), 3);
    EXPECT_EQ(Files(), (std::set<std::string>{Name(500), Name(900), Name(1000)}));
  }
}

TEST_F(CheckpointKeeperTest, ManifestsAreReadOnlyForTheirOwnJob) {
  CheckpointKeeper keeper(jobs_, "w1");
  ASSERT_TRUE(keeper.Record(job_, 0, Write(1, 0.5), 1).ok());
  // The same manifest copied into another job's directory names that job's files nowhere.
  const std::string other = jobs_ + "/" + JobDirName("j-000008", kUid);
  fs::create_directories(other);
  fs::copy_file(keeper.ManifestPath(kId, kUid), other + "/checkpoints.json");
  EXPECT_EQ(keeper.RecoverAll().size(), 1u);
  // A manifest that is not one is refused, naming the file.
  std::ofstream(other + "/checkpoints.json") << "{\"job_id\": 3}";
  auto bad = ReadManifest(other + "/checkpoints.json");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("checkpoints.json"), std::string::npos);
}

}  // namespace worker_checkpoint_keeper_test
}  // namespace convoy

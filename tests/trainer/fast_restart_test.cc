// Fast restarts (issues 16 and 17) with real convoy-trainer processes over real Gloo (and the
// shared-memory all-reduce) on loopback: a restart resumes from the newest snapshot any host
// holds; a job resumes at another world size without repeating or skipping a sample; SIGTERM
// stops every rank at one agreed step with a checkpoint, exiting 0 only for a preemption.
// Every test bounds its time and kills what it started.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <thread>

#include "tests/trainer/trainer_ranks.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/live_state.h"
#include "trainer/snapshot_file.h"

namespace convoy::trainer {
namespace fast_restart_test {

namespace fs = std::filesystem;
using namespace convoy::trainer::test_util;  // NOLINT: the shared helpers
using Env = std::map<std::string, std::string>;
using std::chrono::seconds;

// The step of the "resumed from <kind> <path> at epoch E, step S (sample P of the epoch)"
// line, with kind and path; -1 when there is none.
int64_t ResumedStep(const std::string& log, std::string* kind = nullptr,
                    std::string* path = nullptr) {
  static const std::regex re(
      R"(^resumed from (snapshot|checkpoint|live) (\S+) at epoch \d+, step (\d+) \(sample \d+ of the epoch\)$)");
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, re)) {
      if (kind != nullptr) *kind = m[1];
      if (path != nullptr) *path = m[2];
      return std::stoll(m[3]);
    }
  }
  return -1;
}

// The sequence number of a live state file (odd while an optimiser step updates it); 1 when
// it cannot be read.
uint64_t LiveSeq(const std::string& path) {
  uint64_t seq = 1;
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    if (pread(fd, &seq, sizeof(seq), kLiveStateSeqOffset) != static_cast<ssize_t>(sizeof(seq)))
      seq = 1;
    close(fd);
  }
  return seq;
}

class FastRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy-restart-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  // 2 epochs of 3200 samples: 100 steps of a global batch of 64 at world 2.
  static std::vector<std::string> Common() {
    return {"--train-limit",
            "3200",
            "--epochs",
            "2",
            "--no-eval",
            "--threads",
            "1",
            "--seed",
            "11",
            "--batch-size",
            "32",
            "--log-every",
            "1",
            "--pg-timeout-s",
            "60"};
  }
  static std::vector<std::string> With(std::vector<std::string> a,
                                       const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  // Job j-000042's environment at `attempt`, every rank on one host (one snapshot directory).
  std::function<Env(int)> OneHost(int attempt) {
    return [this, attempt](int) {
      return Env{{"CONVOY_SNAPSHOT_DIR", Path("snapshots")},
                 {"CONVOY_JOB_ID", "j-000042"},
                 {"CONVOY_ATTEMPT", std::to_string(attempt)}};
    };
  }
  // The same with each rank on a host of its own (LOCAL_RANK 0, host<R>-snapshots).
  std::function<Env(int)> OwnHosts(int attempt) {
    return [this, attempt](int r) {
      Env e = OneHost(attempt)(r);
      e["LOCAL_RANK"] = "0";
      e["LOCAL_WORLD_SIZE"] = "1";
      e["CONVOY_SNAPSHOT_DIR"] = Path("host" + std::to_string(r) + "-snapshots");
      return e;
    };
  }
  // The uninterrupted run's final parameters.
  std::string Reference() {
    Ranks ref(2, With(Common(), {"--save-params", Path("ref.pt")}), Path("ref.log"));
    EXPECT_TRUE(ref.AllExitedWith(seconds(120), 0));
    return Path("ref.pt");
  }
  fs::path dir_;
};

// Two "hosts" (each rank its own snapshot directory, LOCAL_RANK 0; the disk checkpoint
// interval far away): rank 0 is killed with SIGKILL and its host's memory is lost with it;
// rank 1's collective fails and it leaves its last will in its own host's memory. The next
// attempt resumes from rank 1's snapshot, at the last completed step, and ends with the
// uninterrupted run's parameters.
TEST_F(FastRestartTest, RestartResumesFromTheNewestSnapshotAnyHostHolds) {
  const std::string ref = Reference();
  const auto args = With(Common(), {"--checkpoint-dir", Path("ckpt"), "--checkpoint-every", "1000",
                                    "--snapshot-every", "5"});
  int64_t done = -1;
  {
    Ranks first(2, args, Path("a0.log"), OwnHosts(0));
    ASSERT_TRUE(Eventually([&] { return LastStep(first.Output(1)) >= 25; }, seconds(120)))
        << first.Output(1);
    first.Signal(0, SIGKILL);
    const auto st = first.Wait(seconds(30));
    EXPECT_TRUE(WIFSIGNALED(st[0]) && WTERMSIG(st[0]) == SIGKILL);
    EXPECT_TRUE(WIFEXITED(st[1]) && WEXITSTATUS(st[1]) == 1) << first.Output(1);
    const std::string out = first.Output(1);
    done = LastStep(out);
    EXPECT_NE(out.find("last will: snapshot " + Path("host1-snapshots") + "/snap-" + Padded(done) +
                       ".bin at step " + std::to_string(done) + " (training failed: "),
              std::string::npos)
        << out;
  }
  ASSERT_GE(done, 25);
  ASSERT_LT(done, 50);  // before the epoch's end, the first disk checkpoint
  fs::remove_all(Path("host0-snapshots"));
  {
    Ranks second(2, With(args, {"--save-params", Path("resumed.pt")}), Path("a1.log"), OwnHosts(1));
    ASSERT_TRUE(second.AllExitedWith(seconds(120), 0));
    std::string kind, path;
    const std::string out = second.Output(0);
    EXPECT_EQ(ResumedStep(out, &kind, &path), done) << out;  // no step lost
    EXPECT_EQ(kind, "snapshot");
    EXPECT_EQ(path.rfind(Path("host1-snapshots"), 0), 0u) << path;
    EXPECT_NE(out.find("(the newest state was rank 1's)"), std::string::npos) << out;
    EXPECT_EQ(ResumedStep(second.Output(1)), done);
  }
  // The same samples in the same order from the same state: bit-identical.
  EXPECT_EQ(MaxRelativeDifference(LoadParams(Path("resumed.pt")), LoadParams(ref)), 0.0);
}

// Every rank is killed at once (a whole job lost, no last will): the restart resumes from the
// newest periodic snapshot, not from the older disk checkpoint, skipping a corrupt and a
// foreign snapshot that look newer.
TEST_F(FastRestartTest, WithoutALastWillTheNewestPeriodicSnapshotIsUsed) {
  const std::string ref = Reference();
  const auto args = With(Common(), {"--checkpoint-dir", Path("ckpt"), "--checkpoint-every", "10",
                                    "--snapshot-every", "3"});
  int64_t snapshot = -1, checkpoint = -1;
  {
    Ranks first(2, args, Path("b0.log"), OneHost(0));
    // Kill after a snapshot newer than the newest checkpoint; the ranks are stopped first so
    // that the files seen are the files left.
    ASSERT_TRUE(first.StopWhen(
        {0, 1},
        [&] {
          return NewestSnapshot(dir_ / "snapshots") >
                 std::max<int64_t>(10, NewestCheckpoint(dir_ / "ckpt"));
        },
        [&] {
          snapshot = NewestSnapshot(dir_ / "snapshots");
          checkpoint = NewestCheckpoint(dir_ / "ckpt");
          return snapshot > checkpoint;
        },
        seconds(120)))
        << first.Output(0);
    first.Signal(0, SIGKILL);
    first.Signal(1, SIGKILL);
    first.Wait(seconds(30));
  }
  ASSERT_GE(checkpoint, 10);
  ASSERT_GT(snapshot, checkpoint);
  // The live state (trainer/live_state.h) is newer still: made torn, as if its rank had died
  // in the middle of an optimiser step, it must not be used.
  {
    const std::string live = Path("snapshots/live-0.state");
    const int fd = open(live.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << live;
    uint64_t seq = LiveSeq(live);
    ASSERT_GT(seq, 0u);
    seq |= 1;  // odd: being updated (it may have been stopped in an update already)
    ASSERT_EQ(pwrite(fd, &seq, sizeof(seq), kLiveStateSeqOffset),
              static_cast<ssize_t>(sizeof(seq)));
    close(fd);
  }
  // Newer-looking files that must be skipped: garbage, and a valid file of another job.
  { std::ofstream(Path("snapshots/snap-000000000098.bin")) << "garbage"; }
  {
    FoundSnapshot good;
    std::string why;
    const std::string file = ReadFile(Path("snapshots/snap-" + Padded(snapshot) + ".bin"));
    ASSERT_TRUE(ParseSnapshot(file, &good, &why)) << why;
    good.meta.job = "j-000043";
    good.meta.step = 99;
    WriteSnapshotFile(Path("snapshots"), good.meta, good.payload, /*keep=*/100);
  }
  Ranks second(2, With(args, {"--save-params", Path("resumed.pt")}), Path("b1.log"), OneHost(1));
  ASSERT_TRUE(second.AllExitedWith(seconds(120), 0));
  std::string kind;
  const std::string out = second.Output(0);
  EXPECT_EQ(ResumedStep(out, &kind), snapshot) << out;
  EXPECT_EQ(kind, "snapshot");
  EXPECT_NE(out.find("snap-000000000098.bin: not a snapshot"), std::string::npos) << out;
  EXPECT_NE(out.find("snap-000000000099.bin: another job's or run's"), std::string::npos) << out;
  EXPECT_NE(out.find("live-0.state: being updated when its rank died (torn); not used"),
            std::string::npos)
      << out;
  EXPECT_EQ(MaxRelativeDifference(LoadParams(Path("resumed.pt")), LoadParams(ref)), 0.0);
}

// Every rank is killed at once, wherever they are in a step, and no periodic snapshot is
// recent: the host's writer kept the live state (trainer/live_state.h) in place at every
// step, so the restart resumes at the last step it completed (printed, or committed and not
// yet printed) and ends with the uninterrupted run's parameters.
TEST_F(FastRestartTest, WhenEveryRankDiesAtOnceTheLiveStateLosesNoCompletedStep) {
  const std::string ref = Reference();
  const auto args = With(Common(), {"--snapshot-every", "1000"});
  int64_t printed = -1;
  {
    Ranks first(2, args, Path("l0.log"), OneHost(0));
    // Stopped outside the writer's optimiser step (a kill inside it leaves a torn file, which
    // the test above covers), then killed.
    ASSERT_TRUE(first.StopWhen(
        {0, 1}, [&] { return LastStep(first.Output(0)) >= 30; },
        [&] { return LiveSeq(Path("snapshots/live-0.state")) % 2 == 0; }, seconds(120)))
        << first.Output(0);
    first.Signal(0, SIGKILL);
    first.Signal(1, SIGKILL);
    first.Wait(seconds(30));
    printed = LastStep(first.Output(0));
    EXPECT_NE(first.Output(0).find("live state: every step, in place in " +
                                   Path("snapshots/live-0.state")),
              std::string::npos)
        << first.Output(0);
  }
  ASSERT_GE(printed, 30);
  ASSERT_LT(printed, 100);
  ASSERT_EQ(NewestSnapshot(dir_ / "snapshots"), -1);  // nothing else to resume from
  Ranks second(2, With(args, {"--save-params", Path("resumed.pt")}), Path("l1.log"), OneHost(1));
  ASSERT_TRUE(second.AllExitedWith(seconds(120), 0));
  std::string kind;
  const std::string out = second.Output(0);
  const int64_t resumed = ResumedStep(out, &kind);
  EXPECT_EQ(kind, "live") << out;
  EXPECT_GE(resumed, printed) << out;
  EXPECT_LE(resumed, printed + 1) << out;
  EXPECT_EQ(MaxRelativeDifference(LoadParams(Path("resumed.pt")), LoadParams(ref)), 0.0);
}

// Rank 1 is killed (stopped first outside its optimiser step): rank 0's last will holds the
// last completed step as bytes, and rank 1's live state, on its own host, the same step. The
// restarted rank 1 offers its live state lazily and receives rank 0's bytes instead: it never
// loads or serialises its own (the restart's path stays as fast as before the live state).
TEST_F(FastRestartTest, ALiveStateIsNotLoadedWhenAPeerHoldsItsStepAsBytes) {
  const std::string ref = Reference();
  const auto args = With(Common(), {"--snapshot-every", "1000"});
  const std::string live = Path("host1-snapshots/live-1.state");
  {
    Ranks first(2, args, Path("p0.log"), OwnHosts(0));
    ASSERT_TRUE(first.StopWhen(
        {1}, [&] { return LastStep(first.Output(1)) >= 20; },
        [&] { return LiveSeq(live) % 2 == 0; }, seconds(120)))
        << first.Output(1);
    first.Signal(1, SIGKILL);
    const auto st = first.Wait(seconds(60));
    EXPECT_TRUE(WIFEXITED(st[0]) && WEXITSTATUS(st[0]) == 1) << first.Output(0);
  }
  Ranks second(2, With(args, {"--save-params", Path("resumed.pt")}), Path("p1.log"), OwnHosts(1));
  ASSERT_TRUE(second.AllExitedWith(seconds(120), 0));
  std::string kind0, kind1, path1;
  const std::string out0 = second.Output(0), out1 = second.Output(1);
  const int64_t step = ResumedStep(out0, &kind0);
  EXPECT_EQ(kind0, "snapshot") << out0;  // rank 0's last will
  // Its live state holds that step, or the one before when it was stopped between the step's
  // all-reduce and its own optimiser step.
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(out1, m, std::regex("live state " + live + ": step (\\d+), checked")))
      << out1;
  EXPECT_GE(std::stoll(m[1]), step - 1) << out1;
  EXPECT_LE(std::stoll(m[1]), step) << out1;
  EXPECT_EQ(ResumedStep(out1, &kind1, &path1), step) << out1;
  EXPECT_EQ(kind1, "snapshot");
  EXPECT_EQ(path1.rfind(Path("host0-snapshots"), 0), 0u) << path1;
  EXPECT_NE(out1.find("(the newest state was rank 0's)"), std::string::npos) << out1;
  EXPECT_EQ(MaxRelativeDifference(LoadParams(Path("resumed.pt")), LoadParams(ref)), 0.0);
}

// Job ids repeat across clusters (a fresh state directory starts at j-000001 again): a job
// that finds another job's checkpoints and snapshots under its own job id, same model, seed
// and data set, says whose they are and starts at step 0; the owner itself resumes from them.
TEST_F(FastRestartTest, AnotherJobsStateUnderTheSameJobIdIsNeverResumed) {
  const std::string kCluster = "fedcba9876543210fedcba9876543210";
  const std::string kFirst = "0123456789abcdef0123456789abcdef";
  const std::string kSecond = "11111111111111111111111111111111";
  auto env = [&](const std::string& uid, const std::string& cluster) {
    return [this, uid, cluster](int) {
      return Env{{"CONVOY_SNAPSHOT_DIR", Path("snapshots")},
                 {"CONVOY_JOB_ID", "j-000001"},
                 {"CONVOY_JOB_UID", uid},
                 {"CONVOY_CLUSTER_ID", cluster}};
    };
  };
  const auto args = With(Common(), {"--epochs", "1", "--checkpoint-dir", Path("ckpt"),
                                    "--checkpoint-every", "10", "--snapshot-every", "3"});
  {
    Ranks first(1, args, Path("a.log"), env(kFirst, kCluster));
    ASSERT_TRUE(first.AllExitedWith(seconds(120), 0)) << first.Output(0);
  }
  const int64_t checkpoint = NewestCheckpoint(dir_ / "ckpt");
  ASSERT_GT(checkpoint, 0);
  const std::string ckpt_path = Path("ckpt/ckpt-" + Padded(checkpoint) + ".pt");
  // What the first job left, put back before each run (each run leaves its own files there).
  fs::copy(dir_ / "ckpt", dir_ / "ckpt.first", fs::copy_options::recursive);
  if (fs::exists(dir_ / "snapshots")) {
    fs::copy(dir_ / "snapshots", dir_ / "snapshots.first", fs::copy_options::recursive);
  }
  auto restore = [this] {
    fs::remove_all(dir_ / "ckpt");
    fs::remove_all(dir_ / "snapshots");
    fs::copy(dir_ / "ckpt.first", dir_ / "ckpt", fs::copy_options::recursive);
    if (fs::exists(dir_ / "snapshots.first")) {
      fs::copy(dir_ / "snapshots.first", dir_ / "snapshots", fs::copy_options::recursive);
    }
  };

  // Another cluster's j-000001, and another job of the same cluster: step 0.
  for (const auto& [uid, cluster] :
       {std::make_pair(kFirst, std::string("22222222222222222222222222222222")),
        std::make_pair(kSecond, kCluster)}) {
    restore();
    Ranks other(1, args, Path("b.log"), env(uid, cluster));
    ASSERT_TRUE(other.AllExitedWith(seconds(120), 0));
    const std::string out = other.Output(0);
    EXPECT_EQ(ResumedStep(out), -1) << out;
    EXPECT_NE(out.find("not resuming from " + ckpt_path + ": it belongs to job " + kFirst +
                       " of cluster " + kCluster + ", not this job (" + uid + " of cluster " +
                       cluster + ")"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("no checkpoint or snapshot to resume from: starting at step 0"),
              std::string::npos)
        << out;
  }
  // The owner resumes from its own checkpoint.
  restore();
  Ranks again(1, args, Path("c.log"), env(kFirst, kCluster));
  ASSERT_TRUE(again.AllExitedWith(seconds(120), 0));
  EXPECT_GE(ResumedStep(again.Output(0)), checkpoint) << again.Output(0);
}

// 2 ranks to a checkpoint mid-epoch, 3 ranks across the epoch's end, 1 rank to the end: every
// epoch is checked to have used each of its samples exactly once, and the learning rate
// follows the world size (linear scaling from the job's largest size).
TEST_F(FastRestartTest, ResumingAtAnotherWorldSizeRepeatsAndSkipsNothing) {
  auto args = [this](const std::string& max_steps) {
    return std::vector<std::string>{"--train-limit",
                                    "3000",
                                    "--epochs",
                                    "2",
                                    "--no-eval",
                                    "--threads",
                                    "1",
                                    "--seed",
                                    "5",
                                    "--batch-size",
                                    "32",
                                    "--log-every",
                                    "1",
                                    "--pg-timeout-s",
                                    "60",
                                    "--checkpoint-dir",
                                    Path("ckpt"),
                                    "--checkpoint-every",
                                    "5",
                                    "--max-steps",
                                    max_steps};
  };
  auto env = [](int) { return Env{{"CONVOY_MAX_WORLD_SIZE", "3"}}; };
  std::string all;
  {
    Ranks two(2, args("20"), Path("w2.log"), env);
    ASSERT_TRUE(two.AllExitedWith(seconds(120), 0));
    const std::string out = two.Output(0);
    EXPECT_NE(out.find(", lr 0.00666667 (0.01 x world 2 / max world 3),"), std::string::npos)
        << out;
    all += out;
  }
  {
    // 1280 samples done; 1720 left in epoch 0 at 96 a step: 18 steps, the last of 88.
    Ranks three(3, args("45"), Path("w3.log"), env);
    ASSERT_TRUE(three.AllExitedWith(seconds(120), 0));
    const std::string out = three.Output(0);
    EXPECT_NE(out.find("resumed from checkpoint " + Path("ckpt/ckpt-000000000020.pt") +
                       " at epoch 0, step 20 (sample 1280 of the epoch)"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("epoch 0 sample check: 3000 of 3000 samples seen exactly once"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("rank 0 epoch 0 step 38/45 "), std::string::npos) << out;
    EXPECT_NE(out.find("rank 0 epoch 1 step 39/45 "), std::string::npos) << out;
    all += out;
  }
  {
    Ranks one(1, args("0"), Path("w1.log"), env);
    ASSERT_TRUE(one.AllExitedWith(seconds(120), 0));
    const std::string out = one.Output(0);
    EXPECT_NE(out.find("resumed from checkpoint " + Path("ckpt/ckpt-000000000045.pt") +
                       " at epoch 1, step 45 (sample 672 of the epoch)"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(", lr 0.00333333 (0.01 x world 1 / max world 3),"), std::string::npos)
        << out;
    // 3000 - 672 = 2328 samples at 32 a step: 73 steps, the last of 24.
    EXPECT_NE(out.find("rank 0 epoch 1 step 118/118 "), std::string::npos) << out;
    all += out;
  }
  for (const char* line : {"epoch 0 sample check: 3000 of 3000 samples seen exactly once",
                           "epoch 1 sample check: 3000 of 3000 samples seen exactly once"}) {
    size_t count = 0;
    for (size_t at = all.find(line); at != std::string::npos; at = all.find(line, at + 1)) ++count;
    EXPECT_EQ(count, 1u) << line << "\n" << all;
  }
  EXPECT_EQ(all.find("FAILED"), std::string::npos) << all;
}

// SIGTERM with the preemption file: every rank stops after the same step, a few steps after
// the signal, rank 0 checkpoints it, all exit 0; the next attempt resumes there and ends with the
// uninterrupted run's parameters.
TEST_F(FastRestartTest, PreemptionStopsEveryRankAtOneStepAndResumesThere) {
  const std::string ref = Reference();
  auto env = [this](int attempt) {
    return [this, attempt](int) {
      return Env{{"CONVOY_SNAPSHOT_DIR", Path("snapshots")},
                 {"CONVOY_PREEMPT_FILE", Path("preempt")},
                 {"CONVOY_JOB_ID", "j-000042"},
                 {"CONVOY_ATTEMPT", std::to_string(attempt)}};
    };
  };
  const auto args =
      With(Common(), {"--checkpoint-dir", Path("ckpt"), "--checkpoint-every", "1000"});
  int64_t stopped = -1;
  {
    Ranks first(2, args, Path("p0.log"), env(0));
    ASSERT_TRUE(Eventually([&] { return LastStep(first.Output(0)) >= 20; }, seconds(120)))
        << first.Output(0);
    { std::ofstream(Path("preempt")) << "preempted by j-000007\n"; }
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t signalled = LastStep(first.Output(0));
    first.Signal(0, SIGTERM);
    first.Signal(1, SIGTERM);
    ASSERT_TRUE(first.AllExitedWith(seconds(20), 0));
    // For the log only (tests assert no wall-clock time): about a second on an idle machine.
    std::cout << "SIGTERM -> both ranks exited 0 in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
              << " s" << std::endl;
    static const std::regex re(
        R"(preempted at step (\d+): preempted by j-000007; checkpoint (\S+)\n)");
    std::smatch m0, m1;
    const std::string out0 = first.Output(0), out1 = first.Output(1);
    ASSERT_TRUE(std::regex_search(out0, m0, re)) << out0;
    ASSERT_TRUE(std::regex_search(out1, m1, re)) << out1;
    stopped = std::stoll(m0[1]);
    EXPECT_EQ(std::stoll(m1[1]), stopped);  // one agreed step
    // Within a few steps of the signal (the log read before it may lag by a few lines), not
    // at the epoch's end (step 50) or the run's.
    EXPECT_GE(stopped, signalled);
    EXPECT_LE(stopped, signalled + 10) << out0;
    EXPECT_EQ(LastStep(out0), stopped);
    EXPECT_EQ(m0[2], Path("ckpt/ckpt-" + Padded(stopped) + ".pt"));
    EXPECT_TRUE(fs::exists(m0[2].str()));
    EXPECT_EQ(NewestSnapshot(dir_ / "snapshots"), stopped);
  }
  fs::remove(Path("preempt"));
  Ranks second(2, With(args, {"--save-params", Path("resumed.pt")}), Path("p1.log"), env(1));
  ASSERT_TRUE(second.AllExitedWith(seconds(120), 0));
  EXPECT_EQ(ResumedStep(second.Output(0)), stopped) << second.Output(0);
  EXPECT_EQ(MaxRelativeDifference(LoadParams(Path("resumed.pt")), LoadParams(ref)), 0.0);
}

// SIGTERM without the preemption file (a cancel, a teardown), here to one rank only: both
// ranks still agree on a step, rank 0 still checkpoints it, and both exit 143, never 0. With
// the hooks the agreement rides on the gradient all-reduce; the Reducer (here over Gloo) has
// its own.
TEST_F(FastRestartTest, SigtermThatIsNotAPreemptionExitsNonZeroAfterTheCheckpoint) {
  for (const std::string ddp : {"hooks", "reducer"}) {
    SCOPED_TRACE(ddp);
    auto env = [this](int) { return Env{{"CONVOY_PREEMPT_FILE", Path("preempt-never-created")}}; };
    // The Reducer over Gloo's TCP, the hooks over shared memory.
    Ranks ranks(2,
                With(Common(), {"--checkpoint-dir", Path("ckpt-" + ddp), "--ddp", ddp,
                                "--allreduce", ddp == "hooks" ? "auto" : "gloo"}),
                Path("t-" + ddp + ".log"), env);
    ASSERT_TRUE(Eventually([&] { return LastStep(ranks.Output(1)) >= 10; }, seconds(120)))
        << ranks.Output(1);
    ranks.Signal(1, SIGTERM);
    ASSERT_TRUE(ranks.AllExitedWith(seconds(20), 143));
    static const std::regex re(
        R"(stopped by SIGTERM at step (\d+) \(no preemption file: not a preemption\); checkpoint (\S+)\n)");
    std::smatch m0, m1;
    const std::string out0 = ranks.Output(0), out1 = ranks.Output(1);
    ASSERT_TRUE(std::regex_search(out0, m0, re)) << out0;
    ASSERT_TRUE(std::regex_search(out1, m1, re)) << out1;
    EXPECT_EQ(m0[1], m1[1]);
    EXPECT_EQ(LastStep(out0), std::stoll(m0[1]));
    EXPECT_TRUE(fs::exists(m0[2].str())) << m0[2];
    EXPECT_NE(out0.find(ddp == "hooks" ? "stop agreement: carried by the gradient all-reduce"
                                       : "stop agreement: its own all-reduce"),
              std::string::npos)
        << out0;
  }
}

// A peer that hangs (SIGSTOP) leaves a rank blocked in a collective: on SIGTERM it writes its
// last will after 2 s and exits 143. A rank still in its rendezvous exits at once.
TEST_F(FastRestartTest, SigtermWhileBlockedOrBeforeTrainingDoesNotWaitForTheKill) {
  {
    Ranks ranks(2, With(Common(), {"--snapshot-dir", Path("snapshots")}), Path("s.log"));
    ASSERT_TRUE(Eventually([&] { return LastStep(ranks.Output(0)) >= 5; }, seconds(120)))
        << ranks.Output(0);
    ranks.Signal(1, SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto t0 = std::chrono::steady_clock::now();
    ranks.Signal(0, SIGTERM);
    const int st = ranks.WaitOne(0, seconds(20));
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ranks.Signal(1, SIGKILL);
    ranks.Wait(seconds(20));
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 143) << st << ranks.Output(0);
    EXPECT_GE(secs, 2.0);  // it waited for its collective's 2 s, and then not for the kill:
                           // the 20 s bound above (upper wall-clock bounds fail on a busy host)
    const std::string out = ranks.Output(0);
    EXPECT_NE(out.find("(SIGTERM while blocked in a collective for 2000 ms"), std::string::npos)
        << out;
    EXPECT_EQ(NewestSnapshot(dir_ / "snapshots"), LastStep(out));
  }
  {
    // Rank 1 of 2 never starts: rank 0 waits in the rendezvous.
    Ranks alone(1, Common(), Path("r.log"), [](int) { return Env{{"WORLD_SIZE", "2"}}; });
    ASSERT_TRUE(Eventually(
        [&] { return alone.Output(0).find(" parameters\n") != std::string::npos; }, seconds(60)))
        << alone.Output(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    alone.Signal(0, SIGTERM);
    // Not after the rendezvous' 60 s (--pg-timeout-s): within the 10 s bound.
    ASSERT_TRUE(alone.AllExitedWith(seconds(10), 143));
    EXPECT_NE(alone.Output(0).find("stopped by SIGTERM before training started; nothing to save"),
              std::string::npos)
        << alone.Output(0);
  }
}

}  // namespace fast_restart_test
}  // namespace convoy::trainer

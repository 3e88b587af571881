// convoy-trainer: models, data validation, sharding, and DDP correctness with real
// processes over real Gloo on loopback.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>
#include <zlib.h>

#include <fcntl.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "rank_process/zygote_protocol.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/models.h"

namespace convoy::trainer {
namespace trainer_test {

namespace fs = std::filesystem;
using namespace convoy::trainer::test_util;  // NOLINT: the shared helpers

TEST(ModelsTest, ParameterCounts) {
  EXPECT_EQ(CountParameters(*MakeModel("fmnist-cnn")), 1630090);
  EXPECT_EQ(CountParameters(*MakeModel("mlp")), 784 * 256 + 256 + 256 * 128 + 128 + 1290);
  // stem 144 + bn 32, blocks 4672 + 14528 + 57728, fc 650.
  EXPECT_EQ(CountParameters(*MakeModel("resnet")), 77754);
  EXPECT_EQ(MakeModel("gpt"), nullptr);
  for (const auto& name : ModelNames()) {
    auto m = MakeModel(name);
    torch::Tensor out = m->forward(torch::zeros({2, 1, 28, 28}));
    EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 10})) << name;
  }
}

// A checkpoint from before global positions ({epoch, steps done in it, global step, seed})
// loads as made at this run's shape; one of another seed or data-set size is refused.
TEST(CheckpointTest, OlderCheckpointsLoadAndForeignOnesAreRefused) {
  auto model = MakeModel("mlp");
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::serialize::OutputArchive root, m, o;
  model->save(m);
  opt.save(o);
  root.write("model", m);
  root.write("optimizer", o);
  root.write("position", torch::tensor({int64_t{1}, int64_t{10}, int64_t{60}, int64_t{11}}));
  std::ostringstream out;
  root.save_to(out);
  std::vector<uint8_t> counts;
  const Position pos = LoadState(out.str(), *model, opt, StateIdentity{11, 3200, "", ""},
                                 StepShape{2, 32, 1}, &counts);
  EXPECT_EQ(pos.epoch, 1);
  EXPECT_EQ(pos.sample, 640);  // 10 steps of 2 x 32
  EXPECT_EQ(pos.global_step, 60);
  ASSERT_EQ(counts.size(), 3200u);
  const auto perm = EpochPermutation(3200, 11, 1);
  for (size_t i = 0; i < perm.size(); ++i) {
    ASSERT_EQ(counts[static_cast<size_t>(perm[i])], i < 640 ? 1 : 0) << i;
  }
  // This format round-trips; another seed or data-set size is another run's state.
  const std::string now = SaveState(*model, opt, pos, counts, StateIdentity{11, 3200, "", ""});
  std::vector<uint8_t> back;
  EXPECT_EQ(LoadState(now, *model, opt, StateIdentity{11, 3200, "", ""}, StepShape{3, 8, 1}, &back)
                .sample,
            640);
  EXPECT_EQ(back, counts);
  for (const StateIdentity& other :
       {StateIdentity{12, 3200, "", ""}, StateIdentity{11, 3000, "", ""}}) {
    EXPECT_THROW(LoadState(now, *model, opt, other, StepShape{2, 32, 1}, &back),
                 std::runtime_error);
  }
}

// A state carries its job's identity; a run with one loads only its own, refuses another
// job's or cluster's and one without identity; a run by hand (no uid) loads any.
TEST(CheckpointTest, AStateOfAnotherJobIdentityIsRefused) {
  auto model = MakeModel("mlp");
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const std::string kUid = "0123456789abcdef0123456789abcdef";
  const std::string kCluster = "fedcba9876543210fedcba9876543210";
  const StateIdentity mine{11, 3200, kUid, kCluster};
  std::vector<uint8_t> counts(3200, 0);
  const std::string ours = SaveState(*model, opt, Position{0, 0, 7}, counts, mine);
  std::vector<uint8_t> back;
  EXPECT_EQ(LoadState(ours, *model, opt, mine, StepShape{1, 32, 1}, &back).global_step, 7);

  StateIdentity other_job = mine;
  other_job.job_uid = "11111111111111111111111111111111";
  try {
    LoadState(ours, *model, opt, other_job, StepShape{1, 32, 1}, &back);
    ADD_FAILURE() << "another job's state was loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "it belongs to job " + kUid + " of cluster " + kCluster +
                  ", not this job (11111111111111111111111111111111 of cluster " + kCluster + ")");
  }
  StateIdentity other_cluster = mine;
  other_cluster.cluster_id = "22222222222222222222222222222222";
  EXPECT_THROW(LoadState(ours, *model, opt, other_cluster, StepShape{1, 32, 1}, &back),
               std::runtime_error);

  // Saved without identity (an older version, or by hand): refused by a job with one.
  const std::string anonymous =
      SaveState(*model, opt, Position{0, 0, 9}, counts, StateIdentity{11, 3200, "", ""});
  try {
    LoadState(anonymous, *model, opt, mine, StepShape{1, 32, 1}, &back);
    ADD_FAILURE() << "a state without identity was loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("it has no job identity"), std::string::npos) << e.what();
  }
  // The trainer by hand (no uid) loads either.
  const StateIdentity by_hand{11, 3200, "", ""};
  EXPECT_EQ(LoadState(anonymous, *model, opt, by_hand, StepShape{1, 32, 1}, &back).global_step, 9);
  EXPECT_EQ(LoadState(ours, *model, opt, by_hand, StepShape{1, 32, 1}, &back).global_step, 7);
}

// Writes IDX files with `n` images/labels into `dir` (optionally broken).
void WriteIdx(const fs::path& dir, int n, uint32_t image_magic = 2051, int labels = -1,
              uint8_t bad_label = 0, size_t truncate_images = 0) {
  fs::create_directories(dir);
  auto be = [](std::string& s, uint32_t v) {
    for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  std::string img, lab;
  be(img, image_magic);
  be(img, n);
  be(img, 28);
  be(img, 28);
  img.append(static_cast<size_t>(n) * 784, '\x10');
  if (truncate_images > 0) img.resize(img.size() - truncate_images);
  const int nl = labels < 0 ? n : labels;
  be(lab, 2049);
  be(lab, nl);
  for (int i = 0; i < nl; ++i) lab.push_back(static_cast<char>(i % 10));
  if (bad_label != 0 && nl > 0) lab.back() = static_cast<char>(bad_label);
  for (auto [name, data] : {std::make_pair("train-images-idx3-ubyte.gz", &img),
                            std::make_pair("train-labels-idx1-ubyte.gz", &lab)}) {
    gzFile f = gzopen((dir / name).c_str(), "wb");
    gzwrite(f, data->data(), static_cast<unsigned>(data->size()));
    gzclose(f);
  }
}

std::string LoadError(const fs::path& dir) {
  try {
    LoadFashionMnist(dir.string(), "train");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The warm trainer runs it before it forks ranks: a process that forks must have one thread.
// In a forked child (one thread, whatever this test process has started), any thread it
// starts shows in /proc/self/task.
TEST(CheckpointTest, WarmingUpTheStateReaderStartsNoThread) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    WarmUpStateLoading();
    int threads = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
      ++threads;
    }
    _exit(threads == 1 ? 0 : 10 + std::min(threads, 100));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "threads after the warm-up: " << WEXITSTATUS(status) - 10;
}

// The warm trainer warms the default model's kernels before it forks ranks: that starts no
// thread (a fork copies only the forking one), and a rank forked afterwards still trains, on
// the kernels made before the fork (one thread) and on more threads (its OpenMP team made
// after the fork). In a fresh process, as the warm trainer is: this test binary's own OpenMP
// team, made by the tests before, would break its forks as it would any fork's.
TEST(ModelsTest, WarmingUpTheKernelsStartsNoThreadAndForkedRanksStillTrain) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/proc/self/exe", "trainer_tests", "--gtest_also_run_disabled_tests",
          "--gtest_filter=ModelsTest.DISABLED_WarmUpKernelsInAFreshProcess", nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "its output above says what failed";
}

// Run by the test above, in a process of its own.
TEST(ModelsTest, DISABLED_WarmUpKernelsInAFreshProcess) {
  WarmUpKernels();
  int threads = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    ++threads;
  }
  EXPECT_EQ(threads, 1);
  for (int n : {1, 2}) {
    const pid_t rank = fork();
    ASSERT_GE(rank, 0);
    if (rank == 0) {
      alarm(60);  // a hang in the forked rank's OpenMP ends here
      torch::set_num_threads(n);
      auto model = MakeModel("fmnist-cnn");
      auto loss = torch::nn::functional::cross_entropy(model->forward(torch::ones({32, 1, 28, 28})),
                                                       torch::zeros({32}, torch::kInt64));
      loss.backward();
      _exit(std::isfinite(loss.item<double>()) && model->parameters()[0].grad().defined() ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(rank, &status, 0), rank);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "the rank forked to train on " << n << " thread(s): status " << status;
  }
}

TEST(FashionMnistTest, BadFilesAreRefusedWithTheProblemNamed) {
  const fs::path base = fs::temp_directory_path() / ("convoy-idx-" + std::to_string(getpid()));
  WriteIdx(base / "good", 5);
  EXPECT_EQ(LoadError(base / "good"), "");
  EXPECT_EQ(LoadFashionMnist((base / "good").string(), "train").size(), 5);

  WriteIdx(base / "magic", 5, 1234);
  EXPECT_NE(LoadError(base / "magic").find("wrong magic number 1234"), std::string::npos);
  WriteIdx(base / "truncated", 5, 2051, -1, 0, 100);
  EXPECT_NE(LoadError(base / "truncated").find("truncated"), std::string::npos);
  WriteIdx(base / "label", 5, 2051, -1, 42);
  EXPECT_NE(LoadError(base / "label").find("label 42"), std::string::npos);
  WriteIdx(base / "count", 5, 2051, 4);
  EXPECT_NE(LoadError(base / "count").find("4 labels for 5 images"), std::string::npos);
  EXPECT_NE(LoadError(base / "missing").find("cannot open"), std::string::npos);
  // A gzip stream cut short.
  WriteIdx(base / "cut", 50);
  fs::resize_file(base / "cut" / "train-images-idx3-ubyte.gz",
                  fs::file_size(base / "cut" / "train-images-idx3-ubyte.gz") / 2);
  EXPECT_NE(LoadError(base / "cut").find("train-images"), std::string::npos);
  fs::remove_all(base);
}

// Runs `world` convoy-trainer processes with the torchrun environment; true when all exit 0.
// With `log`, rank R's output goes to <log>.rank<R>. `nodes` > 1 simulates that many nodes on
// this host (GROUP_RANK, GROUP_WORLD_SIZE; LOCAL_* within each), ranks in node order.
bool RunTrainer(int world, std::vector<std::string> args, const std::string& log = "",
                int nodes = 1) {
  const int local_world = world / nodes;
  const int port = FreePort();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r % local_world).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(local_world).c_str(), 1);
      setenv("GROUP_RANK", std::to_string(r / local_world).c_str(), 1);
      setenv("GROUP_WORLD_SIZE", std::to_string(nodes).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      unsetenv("CONVOY_METRICS_SOCKET");
      unsetenv("CONVOY_CHECKPOINT_DIR");
      if (!log.empty()) {
        int fd =
            open((log + ".rank" + std::to_string(r)).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> argv{const_cast<char*>(CONVOY_TRAINER_BIN)};
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(CONVOY_TRAINER_BIN, argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

class DdpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy-ddp-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  // 50 optimiser steps of a global batch of 64 on the first 3200 training samples.
  std::vector<std::string> Common() {
    return {"--train-limit", "3200", "--max-steps", "50", "--no-eval",
            "--threads",     "1",    "--seed",      "11"};
  }
  fs::path dir_;
};

// (--ddp, --allreduce): convoy's hooks and c10d's Reducer, over Gloo and shared memory.
class DdpEquivalenceTest
    : public DdpTest,
      public ::testing::WithParamInterface<std::pair<std::string, std::string>> {};

TEST_P(DdpEquivalenceTest, TwoRanksEqualOneProcessWithTheGlobalBatch) {
  const auto [ddp, allreduce] = GetParam();
  const std::string path = std::string(allreduce) == "shm" ? "shared memory" : "gloo";
  // 25 steps: rounding differences grow chaotically with the steps, and how fast depends on
  // the CPU's kernels (on an AMD EPYC host 2x32 and 1x64 agree within 1e-5 at 25 steps, differ
  // by 7.6e-4 at 50; on the Xeon of FACTS.md, 1.8e-7 at 50). A wrong average is far larger.
  auto Common = [this] {
    auto args = DdpTest::Common();
    args[3] = "25";  // --max-steps
    return args;
  };
  auto one = Common();
  one.insert(one.end(), {"--batch-size", "64", "--save-params", Path("one.pt")});
  ASSERT_TRUE(RunTrainer(1, one));
  auto two = Common();
  two.insert(two.end(), {"--batch-size", "32", "--save-params", Path("two.pt"), "--ddp", ddp,
                         "--allreduce", allreduce});
  ASSERT_TRUE(RunTrainer(2, two, Path("two.log")));
  for (int r = 0; r < 2; ++r) {
    const std::string log = ReadFile(Path("two.log.rank" + std::to_string(r)));
    EXPECT_NE(log.find("(" + std::string(ddp) + "); all-reduce over " + path), std::string::npos)
        << log;
  }
  auto ref = LoadParams(Path("one.pt"));
  auto rank0 = LoadParams(Path("two.pt"));
  auto rank1 = LoadParams(Path("two.pt.rank1"));
  EXPECT_EQ(MaxRelativeDifference(rank0, rank1), 0.0);  // identical on every rank
  EXPECT_LT(MaxRelativeDifference(rank0, ref), 1e-5);

  // Gradient accumulation (no_sync on all but the last micro-batch): 2 ranks x 2 x 16.
  auto acc = Common();
  acc.insert(acc.end(), {"--batch-size", "16", "--accumulate", "2", "--save-params", Path("acc.pt"),
                         "--ddp", ddp, "--allreduce", allreduce});
  ASSERT_TRUE(RunTrainer(2, acc));
  EXPECT_LT(MaxRelativeDifference(LoadParams(Path("acc.pt")), ref), 1e-5);
  EXPECT_EQ(MaxRelativeDifference(LoadParams(Path("acc.pt")), LoadParams(Path("acc.pt.rank1"))),
            0.0);
}

INSTANTIATE_TEST_SUITE_P(
    HooksAndReducer, DdpEquivalenceTest,
    // Strings, not pointers: CTest's name of each case ends with its parameter as gtest prints
    // it, and a pointer's address changed with each build (so did the name, and CTest never
    // found the case's cost from the last run: it started these long cases last).
    ::testing::Values(std::make_pair(std::string("hooks"), std::string("shm")),
                      std::make_pair(std::string("hooks"), std::string("gloo")),
                      std::make_pair(std::string("reducer"), std::string("shm")),
                      std::make_pair(std::string("reducer"), std::string("gloo"))),
    [](const auto& info) { return std::string(info.param.first) + "_" + info.param.second; });

// 2 nodes x 2 ranks on this host (--allreduce auto): each node sums through its own segment,
// the two leaders across over Gloo. The run finishes, says so, and ends with the parameters
// of 4 ranks all-reducing flat over Gloo, within float32 rounding of the different order of
// the additions (node sums first; 1e-5 of the parameters' scale after 20 steps, as the
// equivalence tests above allow); every rank holds the same parameters, bit for bit.
TEST_F(DdpTest, TwoNodesOfTwoRanksAllReduceHierarchically) {
  auto Common = [this] {
    auto args = DdpTest::Common();
    args[3] = "20";  // --max-steps
    args.insert(args.end(), {"--batch-size", "16"});
    return args;
  };
  auto flat = Common();
  flat.insert(flat.end(), {"--save-params", Path("flat.pt"), "--allreduce", "gloo"});
  ASSERT_TRUE(RunTrainer(4, flat, "", 2));
  const auto ref = LoadParams(Path("flat.pt"));
  // convoy's hooks, and c10d's Reducer through a communication hook.
  for (const std::string ddp : {"hooks", "reducer"}) {
    auto hier = Common();
    hier.insert(hier.end(),
                {"--save-params", Path(ddp + ".pt"), "--allreduce", "auto", "--ddp", ddp});
    ASSERT_TRUE(RunTrainer(4, hier, Path(ddp + ".log"), 2)) << ddp;
    for (int r = 0; r < 4; ++r) {
      const std::string log = ReadFile(Path(ddp + ".log.rank" + std::to_string(r)));
      EXPECT_NE(log.find("all-reduce over hierarchical: shared memory within 2 nodes, gloo across"),
                std::string::npos)
          << log;
    }
    auto rank0 = LoadParams(Path(ddp + ".pt"));
    for (int r = 1; r < 4; ++r) {
      EXPECT_EQ(
          MaxRelativeDifference(LoadParams(Path(ddp + ".pt.rank" + std::to_string(r))), rank0), 0.0)
          << ddp << " rank " << r;
    }
    EXPECT_LT(MaxRelativeDifference(rank0, ref), 1e-5) << ddp;
  }
}

// The last step of an epoch takes the remainder (no drop_last): with 481 samples and a global
// batch of 48, each epoch ends with one sample, which rank 0 of 3 takes while ranks 1 and 2
// join the all-reduce with nothing. Each rank's loss is weighted by its share, so that the
// averaged gradient is that of the mean over the step's samples: the same as one process
// taking all 48 (or 1) at once, with and without accumulation.
TEST_F(DdpTest, PartialLastStepsAverageOverTheirSamples) {
  const std::vector<std::string> base{
      "--train-limit", "481", "--epochs",    "2", "--no-eval", "--threads", "1",
      "--seed",        "11",  "--log-every", "1"};
  auto one = base;
  one.insert(one.end(), {"--batch-size", "48", "--save-params", Path("one.pt")});
  ASSERT_TRUE(RunTrainer(1, one, Path("one.log")));
  const std::string log = ReadFile(Path("one.log.rank0"));
  EXPECT_NE(log.find("rank 0 epoch 1 step 22/22 "), std::string::npos) << log;
  EXPECT_NE(log.find("epoch 1 sample check: 481 of 481 samples seen exactly once"),
            std::string::npos)
      << log;
  auto three = base;
  three.insert(three.end(), {"--batch-size", "16", "--save-params", Path("three.pt")});
  ASSERT_TRUE(RunTrainer(3, three, Path("three.log")));
  auto acc = base;
  acc.insert(acc.end(),
             {"--batch-size", "8", "--accumulate", "2", "--save-params", Path("acc.pt")});
  ASSERT_TRUE(RunTrainer(3, acc));
  const auto ref = LoadParams(Path("one.pt"));
  EXPECT_LT(MaxRelativeDifference(LoadParams(Path("three.pt")), ref), 1e-5);
  EXPECT_EQ(MaxRelativeDifference(LoadParams(Path("three.pt.rank2")), LoadParams(Path("three.pt"))),
            0.0);
  EXPECT_LT(MaxRelativeDifference(LoadParams(Path("acc.pt")), ref), 1e-5);
  EXPECT_NE(ReadFile(Path("three.log.rank0"))
                .find("epoch 0 sample check: 481 of 481 samples seen exactly once"),
            std::string::npos);
}

TEST_F(DdpTest, ResumingFromACheckpointEqualsAnUninterruptedRun) {
  auto base = Common();
  base.insert(base.end(), {"--batch-size", "32"});
  auto full = base;
  full.insert(full.end(), {"--save-params", Path("full.pt")});
  ASSERT_TRUE(RunTrainer(2, full));

  // Stop at step 20, then run again on the same directory to step 50. Checkpoints every 15
  // steps: step 15's, and step 20's because training ends there (without an evaluation,
  // --no-eval, a --max-steps that the interval does not divide was once not saved at all).
  auto first = base;
  first.insert(first.end(), {"--checkpoint-every", "15", "--checkpoint-dir", Path("ckpt")});
  first[3] = "20";  // --max-steps 20
  ASSERT_TRUE(RunTrainer(2, first));
  ASSERT_TRUE(fs::exists(Path("ckpt/ckpt-000000000015.pt")));
  ASSERT_TRUE(fs::exists(Path("ckpt/ckpt-000000000020.pt")));
  // A corrupt newer checkpoint is skipped in favour of the valid one.
  { std::ofstream(Path("ckpt/ckpt-000000000030.pt")) << "garbage"; }
  auto second = base;
  second.insert(second.end(),
                {"--checkpoint-dir", Path("ckpt"), "--save-params", Path("resumed.pt")});
  ASSERT_TRUE(RunTrainer(2, second));
  EXPECT_LT(MaxRelativeDifference(LoadParams(Path("resumed.pt")), LoadParams(Path("full.pt"))),
            1e-6);
}

// The same run as RunTrainer, each rank forked from one warm trainer (`convoy-trainer
// --zygote`, rank_process/zygote_protocol.h) instead of exec'd; true when all exit 0.
bool RunWarmTrainer(int world, const std::vector<std::string>& args, const std::string& log,
                    pid_t* zygote_pid) {
  std::vector<std::string> base;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("CONVOY_", 0) != 0) base.push_back(kv);
  }
  zygote::Process z;
  std::string error;
  if (!zygote::Start(CONVOY_TRAINER_BIN, base, &z, &error)) {
    ADD_FAILURE() << error;
    return false;
  }
  *zygote_pid = z.pid;
  const int port = FreePort();
  std::set<pid_t> ranks;
  std::vector<std::pair<pid_t, int>> exits;
  for (int r = 0; r < world; ++r) {
    zygote::SpawnRequest req;
    req.argv = {CONVOY_TRAINER_BIN};
    req.argv.insert(req.argv.end(), args.begin(), args.end());
    req.env = base;
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"RANK", std::to_string(r)},
             {"WORLD_SIZE", std::to_string(world)},
             {"LOCAL_RANK", std::to_string(r)},
             {"LOCAL_WORLD_SIZE", std::to_string(world)},
             {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", std::to_string(port)}}) {
      req.env.push_back(k + "=" + v);
    }
    const int fd = open((log + ".rank" + std::to_string(r)).c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_t pid = -1;
    bool gone = false;
    const bool ok = zygote::Spawn(z, req, fd, fd, 30000, &pid, &exits, &error, &gone);
    close(fd);
    if (!ok) {
      ADD_FAILURE() << error;
      break;
    }
    ranks.insert(pid);
  }
  bool all_ok = ranks.size() == static_cast<size_t>(world);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  size_t ended = 0;
  while (ended < ranks.size() && std::chrono::steady_clock::now() < deadline) {
    bool ready = false;
    if (!zygote::Drain(z, &exits, &ready)) break;
    for (; ended < exits.size(); ++ended) {
      const int status = exits[ended].second;
      all_ok = all_ok && ranks.count(exits[ended].first) == 1 && WIFEXITED(status) &&
               WEXITSTATUS(status) == 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  all_ok = all_ok && ended == ranks.size();
  close(z.sock);  // the warm trainer leaves when the worker's end closes
  int status = 0;
  waitpid(z.pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return all_ok;
}

// A rank forked from the warm trainer is the same rank as a cold one: identical parameters
// after the same steps (the equivalence test, run both ways).
TEST_F(DdpTest, WarmRanksEqualColdRanks) {
  auto args = Common();
  args[3] = "25";  // --max-steps
  args.insert(args.end(), {"--batch-size", "32"});
  auto cold = args;
  cold.insert(cold.end(), {"--save-params", Path("cold.pt")});
  ASSERT_TRUE(RunTrainer(2, cold));
  auto warm = args;
  warm.insert(warm.end(), {"--save-params", Path("warm.pt")});
  pid_t zygote_pid = -1;
  ASSERT_TRUE(RunWarmTrainer(2, warm, Path("warm.log"), &zygote_pid));
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(ReadFile(Path("warm.log.rank" + std::to_string(r))).find("first step done"),
              std::string::npos);
  }
  auto c0 = LoadParams(Path("cold.pt")), c1 = LoadParams(Path("cold.pt.rank1"));
  auto w0 = LoadParams(Path("warm.pt")), w1 = LoadParams(Path("warm.pt.rank1"));
  EXPECT_EQ(MaxRelativeDifference(w0, c0), 0.0);
  EXPECT_EQ(MaxRelativeDifference(w1, c1), 0.0);
  EXPECT_EQ(MaxRelativeDifference(w0, w1), 0.0);
}

TEST(TrainerFlagsTest, BadFlagsExitTwoNamingTheFlag) {
  for (auto args : std::vector<std::vector<std::string>>{
           {"--batch-size", "zero"}, {"--model", "gpt"}, {"--lr", "-1"}, {"--bogus", "1"}}) {
    pid_t pid = fork();
    if (pid == 0) {
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 2);
      std::vector<char*> argv{const_cast<char*>(CONVOY_TRAINER_BIN)};
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(CONVOY_TRAINER_BIN, argv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << args[0];
  }
}

}  // namespace trainer_test
}  // namespace convoy::trainer

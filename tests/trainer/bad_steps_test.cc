// Bad steps (issue 42) with real convoy-trainer processes over real Gloo (and the shared-memory
// all-reduce) on loopback: a NaN in one rank's loss (the test hook CONVOY_TEST_NAN_LOSS_STEPS)
// is skipped by every rank at the same step; max_bad_steps of them in a row rewind, in the
// same processes, to the newest good snapshot and go on after the offending batches; no
// snapshot or checkpoint holds a value that is not finite. Every test bounds its time and kills
// what it started.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/trainer/trainer_ranks.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/bad_steps.h"
#include "trainer/checkpoint.h"
#include "trainer/models.h"
#include "trainer/options.h"
#include "trainer/snapshot_file.h"
#include "trainer/snapshotter.h"
#include "trainer/train_helpers.h"

namespace convoy::trainer {
namespace bad_steps_test {

using namespace convoy::trainer::test_util;  // NOLINT: the shared helpers

// ---- The count and the test hook's list (no processes).

TEST(BadStepCounterTest, RewindsAfterMaxInARowAndNotTwiceWithoutAGoodStep) {
  BadStepCounter c(3);
  EXPECT_FALSE(c.Record(1, false));
  EXPECT_FALSE(c.Record(2, true));
  EXPECT_FALSE(c.Record(3, true));
  EXPECT_FALSE(c.Record(4, false));  // the run is broken: counting starts again
  EXPECT_FALSE(c.Record(5, true));
  EXPECT_FALSE(c.Record(6, true));
  EXPECT_TRUE(c.Record(7, true));
  EXPECT_EQ(c.first_of_run(), 5);
  EXPECT_EQ(c.total(), 5);
  EXPECT_TRUE(c.MayRewind());
  c.Rewound();
  EXPECT_EQ(c.in_a_row(), 0);
  EXPECT_FALSE(c.Record(8, true));
  EXPECT_FALSE(c.Record(9, true));
  EXPECT_TRUE(c.Record(10, true));
  EXPECT_FALSE(c.MayRewind());  // nothing passed since the last rewind
  BadStepCounter d(3);
  d.Record(1, true);
  d.Record(2, true);
  d.Record(3, true);
  d.Rewound();
  d.Record(4, false);
  d.Record(5, true);
  d.Record(6, true);
  EXPECT_TRUE(d.Record(7, true));
  EXPECT_TRUE(d.MayRewind());  // step 4 passed
}

// The verdict a GPU rank computes on the device (here on the CPU, the same arithmetic): 1 for a
// NaN or an infinite loss in any micro-batch, 0 for finite ones, negative and zero included;
// written into its one float and nowhere else.
TEST(NonFiniteVerdictTest, IsOneWhenAMicroBatchsLossIsNanOrInfiniteAndZeroOtherwise) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto verdict = [](const std::vector<double>& values, torch::Dtype dtype = torch::kFloat32) {
    std::vector<torch::Tensor> losses;
    for (double v : values) losses.push_back(torch::tensor(v).to(dtype));
    torch::Tensor control = torch::full({3}, 7.0f);
    WriteNonFiniteVerdict(losses, control.narrow(0, 2, 1));
    EXPECT_EQ(control[0].item<float>(), 7.0f);
    EXPECT_EQ(control[1].item<float>(), 7.0f);
    return control[2].item<float>();
  };
  EXPECT_EQ(verdict({2.3}), 0.0f);
  EXPECT_EQ(verdict({-1.5}), 0.0f);
  EXPECT_EQ(verdict({0.0}), 0.0f);
  EXPECT_EQ(verdict({1e30, 3e30}), 0.0f);
  EXPECT_EQ(verdict({1.0, 2.0, 3.0}), 0.0f);
  EXPECT_EQ(verdict({nan}), 1.0f);
  EXPECT_EQ(verdict({inf}), 1.0f);
  EXPECT_EQ(verdict({-inf}), 1.0f);
  EXPECT_EQ(verdict({0.5, nan}), 1.0f);
  EXPECT_EQ(verdict({inf, -inf}), 1.0f);
  EXPECT_EQ(verdict({0.7}, torch::kBFloat16), 0.0f);
  EXPECT_EQ(verdict({nan}, torch::kBFloat16), 1.0f);
}

TEST(BadStepCounterTest, TheTestHooksStepList) {
  std::vector<int64_t> steps;
  ASSERT_EQ(ParseStepList("7,13-15,9", &steps), "");
  EXPECT_EQ(steps, (std::vector<int64_t>{7, 9, 13, 14, 15}));
  for (const char* bad : {"", "0", "x", "3-1", "1,", "-2", "1-2-3", "1000000-2000000"}) {
    EXPECT_NE(ParseStepList(bad, &steps), "") << bad;
  }
  setenv(kTestNanLossStepsEnv, "2-x", 1);
  Options o;
  std::vector<std::string> args{"convoy-trainer"};
  std::vector<char*> argv{args[0].data()};
  EXPECT_EQ(ParseOptions(1, argv.data(), &o).rfind(std::string(kTestNanLossStepsEnv) + ": ", 0),
            0u);
  setenv(kTestNanLossStepsEnv, "4", 1);
  Options ok;
  EXPECT_EQ(ParseOptions(1, argv.data(), &ok), "");
  EXPECT_EQ(ok.test_nan_loss_steps, (std::vector<int64_t>{4}));
  EXPECT_EQ(ok.max_bad_steps, 3);
  unsetenv(kTestNanLossStepsEnv);
}

// ---- No saved state holds a value that is not finite (in process).

class NonFiniteStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy-nonfinite-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    torch::manual_seed(3);
    model_ = MakeModel("mlp");
    o_.model = "mlp";
    optimizer_ = MakeOptimizer(o_, 0.01, model_->parameters());
    // One step, so that the optimiser holds momentum buffers.
    torch::nn::functional::cross_entropy(model_->forward(torch::rand({4, 1, 28, 28})),
                                         torch::tensor({1, 2, 3, 4}))
        .backward();
    optimizer_->step();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  Options o_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  const StateIdentity id_{1, 4, "", ""};
  const std::vector<uint8_t> counts_ = std::vector<uint8_t>(4, 0);
};

TEST_F(NonFiniteStateTest, NoSnapshotOrCheckpointIsWrittenOfIt) {
  EXPECT_EQ(NonFiniteState(*model_, *optimizer_), "");
  EXPECT_NO_THROW(SaveState(*model_, *optimizer_, Position{0, 0, 1}, counts_, id_));
  SnapshotMeta meta;
  meta.model = "mlp";
  meta.seed = 1;
  meta.samples = 4;
  Snapshotter snapshotter(dir_.string(), meta, id_, *model_, *optimizer_, [this] {
    Snapshotter::Shadow s;
    auto m = MakeModel("mlp");
    s.optimizer = MakeOptimizer(o_, 0.01, m->parameters());
    s.model = std::move(m);
    return s;
  });
  ASSERT_TRUE(snapshotter.Capture(Position{0, 0, 1}, counts_));
  snapshotter.Flush();
  EXPECT_EQ(NewestSnapshot(dir_), 1);
  {
    torch::NoGradGuard no_grad;
    model_->named_parameters()["fc2.bias"][3] = std::numeric_limits<float>::quiet_NaN();
  }
  EXPECT_EQ(NonFiniteState(*model_, *optimizer_), "fc2.bias");
  EXPECT_THROW(SaveState(*model_, *optimizer_, Position{0, 0, 2}, counts_, id_),
               std::runtime_error);
  EXPECT_THROW(snapshotter.WriteNow(Position{0, 0, 2}, counts_), std::runtime_error);
  ASSERT_TRUE(snapshotter.Capture(Position{0, 0, 3}, counts_));  // written in the background
  snapshotter.Flush();
  EXPECT_EQ(NewestSnapshot(dir_), 1);
  EXPECT_NE(snapshotter.stats().last_error.find("fc2.bias holds a value that is not finite"),
            std::string::npos)
      << snapshotter.stats().last_error;
  // The optimiser's state alone.
  {
    torch::NoGradGuard no_grad;
    model_->named_parameters()["fc2.bias"][3] = 0;
    auto& sgd = static_cast<torch::optim::SGDParamState&>(*optimizer_->state().at(
        StateKey(optimizer_->state(), model_->named_parameters()["fc1.weight"])));
    sgd.momentum_buffer()[0][0] = std::numeric_limits<float>::infinity();
  }
  EXPECT_EQ(NonFiniteState(*model_, *optimizer_), "the optimiser's state of fc1.weight");
}

// ---- Real ranks.

// A metric socket as the worker's: every record a rank writes, one line each.
class MetricsListener {
 public:
  explicit MetricsListener(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << path;
    EXPECT_EQ(listen(fd_, 4), 0);
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      for (ssize_t n; (n = read(c, buf, sizeof(buf))) > 0;) {
        std::lock_guard<std::mutex> lock(mu_);
        text_.append(buf, static_cast<size_t>(n));
      }
      close(c);
    });
  }
  ~MetricsListener() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    unlink(path_.c_str());
  }
  std::string Text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  const std::string path_;
  int fd_ = -1;
  std::mutex mu_;
  std::string text_;
  std::thread thread_;
};

class BadStepsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy-badsteps-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  // One epoch of 1920 samples: 30 steps of a global batch of 64 at world 2.
  static std::vector<std::string> Common(const std::vector<std::string>& more) {
    std::vector<std::string> a{"--train-limit",
                               "1920",
                               "--epochs",
                               "1",
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
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  // Each rank's environment: the NaN steps of its test hook (`nan[r]`, "" for none).
  static std::function<Env(int)> Nans(std::vector<std::string> nan, Env more = {}) {
    return [nan, more](int r) {
      Env e = more;
      if (!nan[static_cast<size_t>(r)].empty())
        e[kTestNanLossStepsEnv] = nan[static_cast<size_t>(r)];
      return e;
    };
  }
  // Both ranks' final parameters (rank 0's file and rank 1's .rank1): bit-identical, every
  // value finite. Returns rank 0's.
  std::vector<torch::Tensor> AgreedFiniteParams(const std::string& name) {
    auto p0 = LoadParams(Path(name));
    auto p1 = LoadParams(Path(name) + ".rank1");
    EXPECT_EQ(MaxRelativeDifference(p1, p0), 0.0) << name << ": the ranks disagree";
    for (const auto& t : p0) EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << name;
    return p0;
  }
  fs::path dir_;
};

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Rank 1's loss is NaN at step 7, rank 0's at step 9: each time both ranks skip that step (and
// only it), agree to the bit on what they apply, and finish; over the hooks and shared memory,
// the Reducer over Gloo (the check's own all-reduce), and bf16 compression (whose error
// feedback must not carry the NaN into the next step).
TEST_F(BadStepsTest, ANanInOneRanksLossIsSkippedByEveryRankAtTheSameStep) {
  const std::vector<std::vector<std::string>> variants{
      {},
      {"--ddp", "reducer", "--allreduce", "gloo"},
      {"--compression", "bf16"},
  };
  for (const auto& variant : variants) {
    const std::string name = variant.empty() ? "hooks" : variant[1];
    SCOPED_TRACE(name);
    auto args = Common({"--save-params", Path(name + ".pt")});
    args.insert(args.end(), variant.begin(), variant.end());
    Ranks ranks(2, args, Path(name + ".log"), Nans({"9", "7"}));
    ASSERT_TRUE(ranks.AllExitedWith(seconds(120), 0));
    for (int r = 0; r < 2; ++r) {
      const std::string out = ranks.Output(r);
      const std::string me = "rank " + std::to_string(r) + ": bad step ";
      EXPECT_NE(
          out.find(me + "7 skipped: the loss was not finite on 1 of 2 rank(s) (this rank's: " +
                   (r == 1 ? "nan" : "")),
          std::string::npos)
          << out;
      EXPECT_NE(out.find(me + "9 skipped: the loss was not finite on 1 of 2 rank(s)"),
                std::string::npos)
          << out;
      EXPECT_EQ(Count(out, ": bad step "), 2u) << out;
      EXPECT_EQ(Count(out, "rewound"), 0u) << out;
      EXPECT_EQ(LastStep(out), 30) << out;
      EXPECT_NE(out.find("bad steps: 2 skipped, 0 rewind(s)"), std::string::npos) << out;
    }
    EXPECT_NE(ranks.Output(0).find("epoch 0 sample check: 1920 of 1920 samples seen exactly once"),
              std::string::npos);
    AgreedFiniteParams(name + ".pt");
  }
}

// The step of the snapshot a rank's "rewound to snapshot <dir>/snap-S.bin of step S" line
// names, -1 when there is none.
int64_t RewoundTo(const std::string& out) {
  static const std::regex re(R"(rewound to snapshot \S+/snap-\d{12}\.bin of step (\d+) after)");
  std::smatch m;
  return std::regex_search(out, m, re) ? std::stoll(m[1]) : -1;
}

// Rank 1's loss is NaN at steps 13 to 15 with max_bad_steps 3 and a snapshot every 5 steps: at
// step 15 both ranks rewind to the newest snapshot on file, S (that of step 10, or of step 5
// when the one due at 10 was skipped because 5's was still being written on a busy machine),
// and go on at step 16 with its batch. The result is bit for bit the run whose steps S+1 to
// 15 were all skipped (no rewind: the state of step S with the position of step 15); every
// sample of the epoch is counted once, and the metric records carry the count and the rewind.
TEST_F(BadStepsTest, RepeatedNansRewindToTheLastGoodSnapshotAndSkipTheirBatches) {
  const std::string socket = Path("metrics.sock");
  std::string records;
  int64_t to = -1;
  {
    MetricsListener metrics(socket);
    Ranks x(2,
            Common({"--save-params", Path("x.pt"), "--snapshot-every", "5", "--snapshot-dir",
                    Path("snapshots"), "--max-bad-steps", "3"}),
            Path("x.log"), [&](int r) {
              Env e{{"CONVOY_METRICS_SOCKET", r == 0 ? socket : ""}};
              if (r == 1) e[kTestNanLossStepsEnv] = "13-15";
              return e;
            });
    ASSERT_TRUE(x.AllExitedWith(seconds(120), 0));
    to = RewoundTo(x.Output(0));
    EXPECT_TRUE(to == 10 || to == 5) << x.Output(0);
    for (int r = 0; r < 2; ++r) {
      const std::string out = x.Output(r);
      const std::string me = "rank " + std::to_string(r) + ": ";
      EXPECT_NE(out.find(me + "bad step 15 skipped: the loss was not finite on 1 of 2 rank(s)"),
                std::string::npos)
          << out;
      EXPECT_NE(out.find(me + "rewound to snapshot " + Path("snapshots") + "/snap-" + Padded(to) +
                         ".bin of step " + std::to_string(to) +
                         " after 3 bad steps in a row (13 to 15) in "),
                std::string::npos)
          << out;
      EXPECT_NE(out.find("training goes on at step 16 (sample 960 of epoch 0): the batches of "
                         "steps " +
                         std::to_string(to + 1) + " to 15 are not trained again"),
                std::string::npos)
          << out;
      EXPECT_EQ(Count(out, ": bad step "), 3u) << out;
      EXPECT_EQ(LastStep(out), 30) << out;
    }
    EXPECT_NE(x.Output(0).find("epoch 0 sample check: 1920 of 1920 samples seen exactly once"),
              std::string::npos)
        << x.Output(0);
    ASSERT_TRUE(Eventually([&] { return metrics.Text().find("\"step\":30,") != std::string::npos; },
                           seconds(10)));
    records = metrics.Text();
  }
  EXPECT_NE(records.find("{\"kind\":\"rewind\",\"step\":15,\"to_step\":" + std::to_string(to) +
                         ",\"bad_steps\":3,\"rewinds\":1}"),
            std::string::npos)
      << records;
  EXPECT_NE(records.find("\"step\":14,"), std::string::npos) << records;
  for (const auto& [step, bad] : {std::pair{12, 0}, {13, 1}, {15, 3}, {30, 3}}) {
    const size_t at = records.find("\"step\":" + std::to_string(step) + ",\"epoch\"");
    ASSERT_NE(at, std::string::npos) << step << "\n" << records;
    const std::string line = records.substr(at, records.find('\n', at) - at);
    EXPECT_NE(line.find("\"bad_steps\":" + std::to_string(bad) + ","), std::string::npos) << line;
    EXPECT_NE(line.find("\"rewinds\":" + std::to_string(step == 30 ? 1 : 0) + "}"),
              std::string::npos)
        << line;
  }

  Ranks y(2, Common({"--save-params", Path("y.pt"), "--max-bad-steps", "20"}), Path("y.log"),
          Nans({"", std::to_string(to + 1) + "-15"}));
  ASSERT_TRUE(y.AllExitedWith(seconds(120), 0));
  EXPECT_EQ(Count(y.Output(0), "rewound"), 0u);
  EXPECT_EQ(MaxRelativeDifference(AgreedFiniteParams("x.pt"), AgreedFiniteParams("y.pt")), 0.0);
}

// With nothing to rewind to, or NaNs again right after the rewind, every rank exits with
// kExitBadSteps (4), saying why, at the same step.
TEST_F(BadStepsTest, BadStepsThatARewindCannotHelpEndTheAttemptWithTheirOwnExitCode) {
  {
    Ranks none(2, Common({"--max-bad-steps", "2", "--snapshot-every", "0"}), Path("none.log"),
               Nans({"", "3-30"}));
    ASSERT_TRUE(none.AllExitedWith(seconds(120), 4));
    for (int r = 0; r < 2; ++r) {
      const std::string out = none.Output(r);
      EXPECT_NE(out.find("convoy-trainer: error: bad steps: 2 bad steps in a row (3 to 4) and no "
                         "snapshot or checkpoint to rewind to"),
                std::string::npos)
          << out;
      EXPECT_EQ(LastStep(out), 4) << out;
    }
  }
  Ranks again(2,
              Common({"--max-bad-steps", "3", "--snapshot-every", "5", "--snapshot-dir",
                      Path("snapshots")}),
              Path("again.log"), Nans({"11-30", ""}));
  ASSERT_TRUE(again.AllExitedWith(seconds(120), 4));
  for (int r = 0; r < 2; ++r) {
    const std::string out = again.Output(r);
    // That of step 10, or of 5 when 10's was skipped (5's still being written).
    const int64_t to = RewoundTo(out);
    EXPECT_TRUE(to == 10 || to == 5) << out;
    EXPECT_NE(out.find("convoy-trainer: error: bad steps: 3 bad steps in a row (14 to 16) right "
                       "after the rewind to the same state: not rewinding again"),
              std::string::npos)
        << out;
  }
}

// A snapshot and a checkpoint every step, NaNs in the last three steps (no rewind): none is
// taken at a bad step, and every file left holds finite values only (read back and loaded).
TEST_F(BadStepsTest, NoSnapshotOrCheckpointHoldsANonFiniteWeight) {
  Ranks ranks(2,
              Common({"--max-steps", "20", "--max-bad-steps", "5", "--snapshot-every", "1",
                      "--snapshot-dir", Path("snapshots"), "--checkpoint-every", "1",
                      "--checkpoint-dir", Path("ckpt")}),
              Path("s.log"), Nans({"", "18-20"}));
  ASSERT_TRUE(ranks.AllExitedWith(seconds(120), 0));
  EXPECT_EQ(LastStep(ranks.Output(0)), 20);
  // Checkpoints are written in the step; snapshots by a nice-19 writer that skips a step's
  // while the previous one is still being written (a loaded host skips many): none newer
  // than the last good step either way.
  const int64_t newest_snapshot = NewestSnapshot(dir_ / "snapshots");
  EXPECT_LE(newest_snapshot, 17);
  EXPECT_GE(newest_snapshot, 1);
  EXPECT_EQ(NewestCheckpoint(dir_ / "ckpt"), 17);
  Options o;
  int files = 0;
  for (const auto& sub : {"snapshots", "ckpt"}) {
    for (const auto& e : fs::directory_iterator(dir_ / sub)) {
      const std::string f = e.path().filename().string();
      if (f.rfind("snap-", 0) != 0 && f.rfind("ckpt-", 0) != 0) continue;
      const std::string file = ReadFile(e.path().string());
      std::string_view bytes = file;
      if (f.rfind("snap-", 0) == 0) {
        FoundSnapshot s;
        std::string why;
        ASSERT_TRUE(ParseSnapshot(file, &s, &why)) << f << ": " << why;
        bytes = s.payload;
      }
      auto model = MakeModel(o.model);
      auto optimizer = MakeOptimizer(o, 0.01, model->parameters());
      std::vector<uint8_t> counts;
      const Position at = LoadState(bytes, *model, *optimizer, StateIdentity{11, 1920, "", ""},
                                    StepShape{2, 32, 1}, &counts);
      EXPECT_LE(at.global_step, 17) << f;
      EXPECT_EQ(NonFiniteState(*model, *optimizer), "") << f;
      ++files;
    }
  }
  EXPECT_GE(files, 3);  // the newest two checkpoints, one or two snapshots
}

}  // namespace bad_steps_test
}  // namespace convoy::trainer

// The live state (trainer/live_state.h) without processes: the parameters and the optimiser's
// state (SGD's momentum, Adam's moments and step counts) live in the file, so what a reader finds
// is what training left at the last commit; a torn file, another job's, another model's, an older
// one and one holding a NaN are not used, and a refused file changes nothing of the reader's model.
#include "trainer/live_state.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <limits>

#include "trainer/models.h"

namespace convoy::trainer {
namespace live_state_test {

namespace fs = std::filesystem;

class LiveStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy-live-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    meta_.job = "j-000007";
    meta_.job_uid = "uid-7";
    meta_.model = "mlp";
    meta_.seed = 3;
    meta_.samples = 100;
    id_.seed = 3;
    id_.samples = 100;
    id_.job_uid = "uid-7";
  }
  void TearDown() override { fs::remove_all(dir_); }

  struct Trained {
    std::shared_ptr<Model> model;
    std::unique_ptr<torch::optim::Optimizer> opt;
  };
  // `optimizer`: "sgd" (with momentum), "adam" or "amsgrad".
  static Trained Make(const std::string& kind = "mlp", const std::string& optimizer = "sgd") {
    Trained t;
    t.model = MakeModel(kind);
    if (optimizer == "sgd") {
      t.opt = std::make_unique<torch::optim::SGD>(t.model->parameters(),
                                                  torch::optim::SGDOptions(0.1).momentum(0.9));
    } else {
      t.opt = std::make_unique<torch::optim::Adam>(
          t.model->parameters(), torch::optim::AdamOptions(0.01).amsgrad(optimizer == "amsgrad"));
    }
    return t;
  }
  // One optimiser step on a random batch, as TrainStep takes it (begin, step, commit).
  static void Step(Trained& t, LiveState& live, int64_t step, std::vector<uint8_t>& counts) {
    auto x = torch::randn({4, 1, 28, 28});
    auto y = torch::randint(0, 10, {4});
    torch::nn::functional::cross_entropy(t.model->forward(x), y).backward();
    live.BeginUpdate();
    t.opt->step();
    t.opt->zero_grad();
    counts[static_cast<size_t>(step)] = 1;
    live.Commit(Position{0, step * 4, step}, counts);
  }
  // `t`'s live state in dir_ as rank 0, after `steps` steps from `counts` zeroed.
  std::unique_ptr<LiveState> AttachAndStep(Trained& t, int64_t steps,
                                           std::vector<uint8_t>& counts) {
    counts.assign(100, 0);
    std::string why;
    auto live =
        LiveState::Attach(dir_.string(), 0, meta_, *t.model, *t.opt, Position{}, counts, &why);
    EXPECT_NE(live, nullptr) << why;
    for (int64_t s = 1; live != nullptr && s <= steps; ++s) Step(t, *live, s, counts);
    return live;
  }
  std::optional<StateOffer> Read(Trained& into, int64_t newer_than = -1) {
    return ReadLiveState(dir_.string(), meta_, id_, newer_than, *into.model, *into.opt);
  }
  static double Diff(torch::nn::Module& a, torch::nn::Module& b) {
    double worst = 0;
    auto pa = a.parameters(), pb = b.parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<double>());
    }
    return worst;
  }
  fs::path dir_;
  SnapshotMeta meta_;
  StateIdentity id_;
};

TEST_F(LiveStateTest, AReaderFindsWhatTheLastCommitLeftAndNothingItMustNotUse) {
  torch::manual_seed(1);
  Trained t = Make();
  std::vector<uint8_t> counts;
  std::string why;
  // Three steps: a commit copies only the position, the counts and the buffers, so a reader
  // that finds the trained parameters found them in the file, where the steps left them.
  auto live = AttachAndStep(t, 3, counts);
  ASSERT_NE(live, nullptr);

  Trained r = Make();
  ASSERT_GT(Diff(*t.model, *r.model), 0.0);
  auto offer = Read(r);
  ASSERT_TRUE(offer.has_value());
  EXPECT_EQ(offer->kind, "live");
  EXPECT_EQ(offer->step, 3);
  EXPECT_EQ(offer->path, (dir_ / "live-0.state").string());
  // Lazy: nothing is loaded or serialised until the ranks choose it.
  ASSERT_TRUE(offer->lazy());
  EXPECT_TRUE(offer->data().empty());
  EXPECT_GT(Diff(*t.model, *r.model), 0.0);
  auto fill = offer->materialise;
  fill(*offer);
  EXPECT_FALSE(offer->data().empty());
  EXPECT_EQ(Diff(*t.model, *r.model), 0.0);
  // The offer is a state LoadState takes: the position, the counts and the momentum too.
  Trained l = Make();
  std::vector<uint8_t> loaded;
  const Position pos = LoadState(offer->data(), *l.model, *l.opt, id_, StepShape{}, &loaded);
  EXPECT_EQ(pos.global_step, 3);
  EXPECT_EQ(pos.sample, 12);
  EXPECT_EQ(loaded, counts);
  EXPECT_EQ(Diff(*t.model, *l.model), 0.0);
  // The same next step from both: the momentum came along.
  torch::manual_seed(9);
  Step(t, *live, 4, counts);
  auto l_live = LiveState::Attach((dir_ / "none" / "other").string(), 1, meta_, *l.model, *l.opt,
                                  pos, loaded, &why);
  EXPECT_EQ(l_live, nullptr);  // its parent is missing: says why
  EXPECT_NE(why.find("cannot create"), std::string::npos) << why;
  l_live =
      LiveState::Attach((dir_ / "other").string(), 1, meta_, *l.model, *l.opt, pos, loaded, &why);
  ASSERT_NE(l_live, nullptr) << why;
  torch::manual_seed(9);
  Step(l, *l_live, 4, loaded);
  EXPECT_EQ(Diff(*t.model, *l.model), 0.0);

  // Not newer than what the reader holds: not read.
  Trained n = Make();
  EXPECT_FALSE(Read(n, 4).has_value());
  // Another job's identity, another model: not used.
  SnapshotMeta other = meta_;
  other.job_uid = "uid-8";
  EXPECT_FALSE(ReadLiveState(dir_.string(), other, id_, -1, *n.model, *n.opt).has_value());
  Trained cnn = Make("fmnist-cnn");
  EXPECT_FALSE(Read(cnn).has_value());
  // Torn (a step began and never committed): not used, and the reader's model untouched.
  live->BeginUpdate();
  const auto before = n.model->parameters()[0].clone();
  EXPECT_FALSE(Read(n).has_value());
  EXPECT_TRUE(torch::equal(before, n.model->parameters()[0]));
  // Committed with a NaN in a parameter: not used, the reader's model untouched.
  {
    torch::NoGradGuard no_grad;
    t.model->parameters()[0].view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  }
  live->Commit(Position{0, 20, 5}, counts);
  EXPECT_FALSE(Read(n).has_value());
  EXPECT_TRUE(torch::equal(before, n.model->parameters()[0]));
}

// Adam (with and without amsgrad): its moments live in the file and its step counts, which are
// C++ members, are copied in at each commit, so the next step from a reader's state is the
// same step, bias corrections included. Attached before Adam's first step, its states are
// made as that step would make them. Another optimiser is not kept, and says why.
TEST_F(LiveStateTest, AdamsMomentsAndStepCountsComeAlong) {
  for (const std::string kind : {"adam", "amsgrad"}) {
    SCOPED_TRACE(kind);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    torch::manual_seed(1);
    Trained t = Make("mlp", kind);
    std::vector<uint8_t> counts;
    std::string why;
    auto live = AttachAndStep(t, 3, counts);
    ASSERT_NE(live, nullptr);

    Trained r = Make("mlp", kind);
    auto offer = Read(r);
    ASSERT_TRUE(offer.has_value());
    EXPECT_EQ(offer->step, 3);
    auto fill = offer->materialise;
    fill(*offer);
    EXPECT_EQ(Diff(*t.model, *r.model), 0.0);
    for (const auto& [key, state] : r.opt->state()) {
      EXPECT_EQ(static_cast<torch::optim::AdamParamState&>(*state).step(), 3) << key;
    }
    // Loaded from the offer's bytes by a third, whose next step is the writer's next step.
    Trained l = Make("mlp", kind);
    std::vector<uint8_t> loaded;
    LoadState(offer->data(), *l.model, *l.opt, id_, StepShape{}, &loaded);
    torch::manual_seed(9);
    Step(t, *live, 4, counts);
    auto l_live = LiveState::Attach((dir_ / "other").string(), 1, meta_, *l.model, *l.opt,
                                    Position{0, 12, 3}, loaded, &why);
    ASSERT_NE(l_live, nullptr) << why;
    torch::manual_seed(9);
    Step(l, *l_live, 4, loaded);
    EXPECT_EQ(Diff(*t.model, *l.model), 0.0);
    // A reader of the other flavour (amsgrad or not) has another layout.
    Trained other = Make("mlp", kind == "adam" ? "amsgrad" : "adam");
    EXPECT_FALSE(Read(other).has_value());
  }

  auto model = MakeModel("mlp");
  torch::optim::RMSprop rmsprop(model->parameters(), torch::optim::RMSpropOptions(0.01));
  std::string why;
  EXPECT_EQ(LiveState::Attach(dir_.string(), 7, meta_, *model, rmsprop, Position{}, {}, &why),
            nullptr);
  EXPECT_EQ(why, "the optimiser is neither SGD nor Adam");
  EXPECT_FALSE(fs::exists(dir_ / "live-7.state"));
}

}  // namespace live_state_test
}  // namespace convoy::trainer

// The `sweep:` section (spec/sweep_spec.h, spec/sweep_spec_file.h): read from YAML, every bad
// value refused with its field named, expanded into trials (grid in order, random
// reproducible), each trial's spec made by the same --set override the CLI uses.
#include <gtest/gtest.h>

#include <set>

#include "spec/job_spec.h"
#include "spec/sweep_spec.h"
#include "spec/sweep_spec_file.h"

namespace convoy {
namespace sweep_spec_test {

constexpr const char* kBase = R"(name: lr
nodes: 1
procs_per_node: 1
trainer: {model: fmnist-cnn, lr: 0.01, max_steps: 50}
)";

StatusOr<v1::JobSpec> Parse(const std::string& sweep) {
  return ParseJobSpec(std::string(kBase) + sweep, "sweep.yaml");
}

std::string Error(const std::string& sweep) {
  auto spec = Parse(sweep);
  return spec.ok() ? "(accepted)" : spec.status().message();
}

std::vector<std::string> Values(const std::vector<TrialValues>& trials) {
  std::vector<std::string> out;
  for (const TrialValues& t : trials) out.push_back(DescribeTrial(t));
  return out;
}

TEST(SweepSpec, AMappingOfPathsReadsAsParametersInOrderWithDefaults) {
  auto spec = Parse(R"(sweep:
  parameters: {trainer.lr: [0.1, 0.01, 0.001], trainer.batch_size: [32, 64]}
  metric: test_accuracy
  goal: max
  max_parallel: 2
  early_stop: asha
)");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const v1::SweepSpec& s = spec->sweep();
  ASSERT_EQ(s.parameters_size(), 2);
  EXPECT_EQ(s.parameters(0).path(), "trainer.lr");
  EXPECT_EQ(s.parameters(0).values(2), "0.001");
  EXPECT_EQ(s.parameters(1).path(), "trainer.batch_size");
  const SweepSettings settings = ResolveSweep(s);
  EXPECT_TRUE(settings.maximize);
  EXPECT_EQ(settings.max_parallel, 2);
  EXPECT_TRUE(settings.asha);
  EXPECT_EQ(settings.min_steps, kDefaultAshaMinSteps);
  EXPECT_EQ(settings.reduction_factor, kDefaultAshaReductionFactor);
  // Grid: every combination, the last parameter fastest.
  EXPECT_EQ(
      Values(SweepTrialValues(s)),
      (std::vector<std::string>{
          "trainer.lr=0.1 trainer.batch_size=32", "trainer.lr=0.1 trainer.batch_size=64",
          "trainer.lr=0.01 trainer.batch_size=32", "trainer.lr=0.01 trainer.batch_size=64",
          "trainer.lr=0.001 trainer.batch_size=32", "trainer.lr=0.001 trainer.batch_size=64"}));
  // The metric defaults to loss, whose goal defaults to min.
  auto plain = Parse("sweep: {parameters: {trainer.lr: [0.1]}}\n");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(ResolveSweep(plain->sweep()).metric, "loss");
  EXPECT_FALSE(ResolveSweep(plain->sweep()).maximize);
  EXPECT_EQ(ResolveSweep(plain->sweep()).max_parallel, 1);
}

TEST(SweepSpec, TheListFormAndRangesReadToo) {
  auto spec = Parse(R"(sweep:
  sampling: random
  trials: 5
  seed: 7
  parameters:
    - {path: trainer.lr, min: 0.0001, max: 0.1, log: true}
    - {path: trainer.batch_size, values: [32, 64, 128]}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const v1::SweepSpec& s = spec->sweep();
  ASSERT_EQ(s.parameters_size(), 2);
  EXPECT_TRUE(s.parameters(0).log());
  EXPECT_DOUBLE_EQ(s.parameters(0).max(), 0.1);
  // Random: reproducible (the same spec, the same trials), within the range, from the values.
  const std::vector<TrialValues> a = SweepTrialValues(s);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(Values(a), Values(SweepTrialValues(s)));
  std::set<std::string> lrs;
  for (const TrialValues& t : a) {
    const double lr = std::stod(t[0].value());
    EXPECT_GE(lr, 0.0001);
    EXPECT_LE(lr, 0.1);
    lrs.insert(t[0].value());
    EXPECT_TRUE(t[1].value() == "32" || t[1].value() == "64" || t[1].value() == "128");
  }
  EXPECT_GT(lrs.size(), 1u);
  v1::SweepSpec other = s;
  other.set_seed(8);
  EXPECT_NE(Values(a), Values(SweepTrialValues(other)));
  // Each trial's spec: the base with the values applied as --set applies them.
  auto trials = ExpandSweep(*spec);
  ASSERT_TRUE(trials.ok()) << trials.status().message();
  ASSERT_EQ(trials->size(), 5u);
  for (const SweepTrial& t : *trials) {
    EXPECT_FALSE(t.spec.has_sweep());
    EXPECT_DOUBLE_EQ(t.spec.trainer().lr(), std::stod(t.values[0].value()));
    EXPECT_EQ(std::to_string(t.spec.trainer().batch_size()), t.values[1].value());
    EXPECT_EQ(t.spec.trainer().max_steps(), 50);  // the rest of the base is kept
    EXPECT_EQ(t.spec.name(), "lr");
  }
}

TEST(SweepSpec, BadValuesAreRefusedNamingTheirField) {
  const struct {
    const char* sweep;
    const char* expected;
  } kCases[] = {
      {"sweep: {parameters: {trainer.lr: [0.1]}, goal: up}\n",
       "sweep.goal: must be one of max, min"},
      {"sweep: {parameters: {trainer.lr: [0.1]}, metric: test_accuracy}\n",
       "sweep.goal: missing (max"},
      {"sweep: {parameters: {trainer.lr: []}}\n", "sweep.parameters[0].values: missing"},
      {"sweep: {parameters: {}}\n", "sweep.parameters: missing"},
      {"sweep: {parameters: {trainer.lr: [0.1], trainer..x: [1]}}\n",
       "sweep.parameters[1].path: 'trainer..x' is not a field"},
      {"sweep: {parameters: {trainer.lr: [0.1]}, max_parallel: 0}\n",
       "sweep.max_parallel: must be between 1 and 256, got 0"},
      {"sweep: {parameters: {trainer.lr: [0.1]}, max_parallel: two}\n",
       "sweep.max_parallel: expected an integer, got 'two'"},
      {"sweep: {parameters: {trainer.lr: [0.1]}, sampling: random}\n", "sweep.trials: missing"},
      {"sweep: {parameters: {trainer.lr: [0.1]}, trials: 3}\n",
       "sweep.trials: is for sampling: random"},
      {"sweep: {parameters: {trainer.lr: {min: 0.1, max: 0.2}}}\n",
       "sweep.parameters[0].min: a range (min, max) is for sampling: random"},
      {"sweep: {sampling: random, trials: 2, parameters: {trainer.lr: {min: 0, max: 1, log: "
       "true}}}\n",
       "sweep.parameters[0].min: must be greater than 0 with log"},
      {"sweep: {parameters: {trainer.lr: [0.1]}, early_stop: hyperband}\n",
       "sweep.early_stop: must be one of none, asha"},
      {"sweep: {parameters: {trainer.lr: [0.1]}, early_stop: asha, asha: {reduction_factor: "
       "1}}\n",
       "sweep.asha.reduction_factor: must be between 2 and 100, got 1"},
      {"sweep: {parameters: {trainer.lr: [0.1]}, asha: {min_steps: 10}}\n",
       "sweep.asha: is for early_stop: asha"},
      {"sweep: {parameters: {trainer.lr: [0.1]}, metrc: loss}\n",
       "sweep.metrc: unknown field; did you mean 'metric'?"},
      {"sweep: {parameters: {sweep.metric: [loss]}}\n",
       "sweep.parameters[0].path: a sweep cannot sweep its own settings"},
  };
  for (const auto& c : kCases) {
    const std::string error = Error(c.sweep);
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.sweep << "\n  got: " << error;
  }
  // A line and column point at the field.
  EXPECT_NE(
      Error("sweep:\n  parameters: {trainer.lr: [0.1]}\n  goal: up\n").find("sweep.yaml:7:9:"),
      std::string::npos)
      << Error("sweep:\n  parameters: {trainer.lr: [0.1]}\n  goal: up\n");
}

TEST(SweepSpec, APathOrValueThatSetRefusesIsNamedByExpandSweep) {
  auto spec = Parse("sweep: {parameters: {trainer.lr: [0.1], trainer.lrr: [1]}}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto trials = ExpandSweep(*spec);
  ASSERT_FALSE(trials.ok());
  EXPECT_NE(trials.status().message().find(
                "sweep.parameters[1].path: trainer.lrr: unknown field; did you mean 'lr'?"),
            std::string::npos)
      << trials.status().message();

  spec = Parse("sweep: {parameters: {trainer.batch_size: [32, big, 0]}}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  trials = ExpandSweep(*spec);
  ASSERT_FALSE(trials.ok());
  const std::string& m = trials.status().message();
  EXPECT_NE(m.find("sweep.parameters[0].values[1]: trainer.batch_size: expected an integer"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("sweep.parameters[0].values[2]: trainer.batch_size: must be between"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("values[0]"), std::string::npos) << m;

  // env values are any scalar; a list for a field that takes one (command) is kept as YAML.
  auto ok = ParseJobSpec(
      "name: c\nnodes: 1\nprocs_per_node: 1\ncommand: [python3, a.py]\n"
      "sweep: {parameters: {env.LR: [0.1, 1e-3], command: [[python3, b.py], [python3, c.py]]}}\n",
      "c.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  auto expanded = ExpandSweep(*ok);
  ASSERT_TRUE(expanded.ok()) << expanded.status().message();
  ASSERT_EQ(expanded->size(), 4u);
  EXPECT_EQ((*expanded)[1].spec.env().at("LR"), "0.1");
  EXPECT_EQ((*expanded)[1].spec.command(1), "c.py");
  EXPECT_EQ((*expanded)[2].spec.env().at("LR"), "1e-3");
}

TEST(SweepSpec, TheSweepFlagFillsTheSameMessage) {
  v1::SweepSpec sweep;
  ASSERT_TRUE(AddSweepFlag("trainer.lr=0.1,0.01,0.001", &sweep).ok());
  ASSERT_EQ(sweep.parameters_size(), 1);
  EXPECT_EQ(sweep.parameters(0).path(), "trainer.lr");
  EXPECT_EQ(sweep.parameters(0).values_size(), 3);
  EXPECT_EQ(sweep.parameters(0).values(1), "0.01");
  const Status bad = AddSweepFlag("trainer.lr", &sweep);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--sweep 'trainer.lr': expected PATH=V1,V2"), std::string::npos);
  EXPECT_FALSE(AddSweepFlag("trainer.lr=0.1,,2", &sweep).ok());
}

TEST(SweepSpec, AGridOverTheTrialLimitIsRefused) {
  std::string values = "[";
  for (int i = 0; i < 40; ++i) values += (i ? ", " : "") + std::to_string(i + 1);
  values += "]";
  const std::string error = Error("sweep: {parameters: {trainer.max_steps: " + values +
                                  ", trainer.batch_size: " + values + "}}\n");
  EXPECT_NE(error.find("sweep.parameters: make 1600 combinations; at most 1000"), std::string::npos)
      << error;
}

TEST(SweepSpec, TheExampleSweepExpandsToItsThreeLearningRates) {
  auto spec = LoadJobSpecFile(std::string(CONVOY_SOURCE_DIR) + "/examples/sweep.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(ResolveSweep(spec->sweep()).max_parallel, 2);
  auto trials = ExpandSweep(*spec);
  ASSERT_TRUE(trials.ok()) << trials.status().message();
  ASSERT_EQ(trials->size(), 3u);
  EXPECT_DOUBLE_EQ((*trials)[0].spec.trainer().lr(), 0.1);
  EXPECT_DOUBLE_EQ((*trials)[2].spec.trainer().lr(), 0.001);
  EXPECT_EQ((*trials)[2].spec.trainer().max_steps(), 200);
}

}  // namespace sweep_spec_test
}  // namespace convoy

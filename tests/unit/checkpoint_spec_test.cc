// Checkpoints kept by policy (spec/checkpoint_spec.h): the `checkpoint:` and
// `resume_checkpoint` fields as a spec file writes them, their validation (every bad value
// names its field), and the one rule of what a policy keeps and which checkpoint is the best.
#include "spec/checkpoint_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "spec/job_spec.h"

namespace convoy {
namespace checkpoint_spec_test {

const std::string kBase = "name: ckpt\nnodes: 1\nprocs_per_node: 1\ncommand: [python3, t.py]\n";

StatusOr<v1::JobSpec> Parse(const std::string& extra) {
  return ParseJobSpec(kBase + extra, "job.yaml");
}

TEST(CheckpointSpecTest, ThePolicyAndResumeCheckpointAsWritten) {
  auto spec = Parse(
      "checkpoint: {keep_last: 2, keep_best: {metric: test_accuracy, goal: max, count: 1}}\n"
      "resume_from: j-000004\nresume_checkpoint: best\n");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->checkpoint().keep_last(), 2);
  EXPECT_EQ(spec->checkpoint().keep_best().metric(), "test_accuracy");
  EXPECT_EQ(spec->checkpoint().keep_best().goal(), "max");
  EXPECT_EQ(spec->checkpoint().keep_best().count(), 1);
  EXPECT_TRUE(HasCheckpointPolicy(*spec));
  EXPECT_TRUE(ResumesBest(*spec));
  // --set reaches into the policy, and the rest of it stays.
  auto changed = OverrideJobSpec(*spec, {"checkpoint.keep_last=5"}, "job.yaml");
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_EQ(changed->checkpoint().keep_last(), 5);
  EXPECT_EQ(changed->checkpoint().keep_best().metric(), "test_accuracy");
  EXPECT_EQ(changed->resume_checkpoint(), "best");
  // keep_last alone; goal defaults to max.
  auto last = Parse("checkpoint: {keep_last: 3}\n");
  ASSERT_TRUE(last.ok()) << last.status().message();
  EXPECT_TRUE(HasCheckpointPolicy(*last));
  EXPECT_FALSE(ResumesBest(*last));
  EXPECT_TRUE(GoalIsMax(last->checkpoint().keep_best()));
  auto none = Parse("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(HasCheckpointPolicy(*none));
}

TEST(CheckpointSpecTest, EveryBadValueNamesItsField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"checkpoint: {keep_last: -1}\n", "checkpoint.keep_last: must be between 0 and 1000"},
      {"checkpoint: {keep_last: 1001}\n", "checkpoint.keep_last: must be between 0 and 1000"},
      {"checkpoint: {keep_last: two}\n", "checkpoint.keep_last: expected an integer"},
      {"checkpoint: {}\n", "checkpoint: keeps nothing"},
      {"checkpoint: {keep_best: {count: 1}}\n", "checkpoint.keep_best.metric: missing"},
      {"checkpoint: {keep_best: {metric: test_accuracy}}\n",
       "checkpoint.keep_best.count: must be at least 1"},
      {"checkpoint: {keep_best: {metric: 'a b', count: 1}}\n",
       "checkpoint.keep_best.metric: 'a b' is not a metric name"},
      {"checkpoint: {keep_best: {metric: loss, goal: up, count: 1}}\n",
       "checkpoint.keep_best.goal: must be max or min, got 'up'"},
      {"checkpoint: {keep_best: {metric: loss, count: 1001}}\n",
       "checkpoint.keep_best.count: must be between 0 and 1000"},
      {"checkpoint: {keep_best: {metrik: loss, count: 1}}\n",
       "checkpoint.keep_best.metrik: unknown field; did you mean 'metric'?"},
      {"checkpoint: {keep_lats: 2}\n", "checkpoint.keep_lats: unknown field; did you mean"},
      {"checkpoint: 3\n", "checkpoint: expected a mapping"},
      {"resume_from: j-000004\nresume_checkpoint: newest\n",
       "resume_checkpoint: must be latest or best, got 'newest'"},
      {"resume_checkpoint: best\n", "resume_checkpoint: needs resume_from naming a job"},
      {"resume_from: ckpt/x.pt\nresume_checkpoint: best\n",
       "resume_checkpoint: needs resume_from naming a job"},
  };
  for (const auto& [extra, want] : cases) {
    auto spec = Parse(extra);
    ASSERT_FALSE(spec.ok()) << extra;
    EXPECT_NE(spec.status().message().find(want), std::string::npos)
        << extra << " -> " << spec.status().message();
  }
  // The same checks for a spec that came without a file (an RPC).
  v1::JobSpec rpc = *Parse("");
  rpc.mutable_checkpoint()->mutable_keep_best()->set_goal("sideways");
  rpc.mutable_checkpoint()->mutable_keep_best()->set_metric("loss");
  rpc.mutable_checkpoint()->mutable_keep_best()->set_count(1);
  Status st = ValidateJobSpec(rpc);
  EXPECT_NE(st.message().find("checkpoint.keep_best.goal: must be max or min"), std::string::npos)
      << st.message();
}

// Ten checkpoints, steps 100..1000, test accuracy rising to step 500 and falling after.
std::vector<CheckpointCandidate> Ten() {
  std::vector<CheckpointCandidate> all;
  const double acc[] = {0.50, 0.60, 0.70, 0.80, 0.90, 0.85, 0.84, 0.83, 0.82, 0.81};
  for (int i = 0; i < 10; ++i) all.push_back({100 * (i + 1), i, {{"test_accuracy", acc[i]}}});
  return all;
}

v1::CheckpointPolicy Policy(int last, const std::string& metric, const std::string& goal,
                            int count) {
  v1::CheckpointPolicy p;
  p.set_keep_last(last);
  p.mutable_keep_best()->set_metric(metric);
  p.mutable_keep_best()->set_goal(goal);
  p.mutable_keep_best()->set_count(count);
  return p;
}

TEST(CheckpointPolicyTest, KeepLastTwoAndBestOneOverTenKeepsExactlyThose) {
  const auto kept = ApplyCheckpointPolicy(Policy(2, "test_accuracy", "max", 1), Ten());
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept.at(9), std::vector<std::string>{"last"});  // step 1000
  EXPECT_EQ(kept.at(8), std::vector<std::string>{"last"});  // step 900
  EXPECT_EQ(kept.at(4), std::vector<std::string>{"best"});  // step 500, 0.90
  // The best among the newest: kept once, as both.
  auto rising = Ten();
  rising[9].metrics["test_accuracy"] = 0.99;
  const auto both = ApplyCheckpointPolicy(Policy(2, "test_accuracy", "max", 1), rising);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both.at(9), (std::vector<std::string>{"last", "best"}));
  // min: the lowest loss.
  std::vector<CheckpointCandidate> losses = {
      {1, 0, {{"loss", 0.3}}}, {2, 1, {{"loss", 0.1}}}, {3, 2, {{"loss", 0.2}}}};
  const auto low = ApplyCheckpointPolicy(Policy(1, "loss", "min", 1), losses);
  ASSERT_EQ(low.size(), 2u);
  EXPECT_EQ(low.at(1), std::vector<std::string>{"best"});
  EXPECT_EQ(low.at(2), std::vector<std::string>{"last"});
}

TEST(CheckpointPolicyTest, TiesGoToTheNewerAndTheNewestIsAlwaysKept) {
  std::vector<CheckpointCandidate> all = {{100, 0, {{"test_accuracy", 0.9}}},
                                          {200, 1, {{"test_accuracy", 0.9}}},
                                          {300, 2, {{"test_accuracy", 0.5}}},
                                          {400, 3, {{"test_accuracy", 0.4}}}};
  const auto kept = ApplyCheckpointPolicy(Policy(0, "test_accuracy", "max", 1), all);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept.at(1), std::vector<std::string>{"best"});  // the newer of the two 0.9s
  EXPECT_EQ(kept.at(3), std::vector<std::string>{"last"});  // keep_last 0: the newest anyway
  // The same step written twice: the later arrival is the newer.
  std::vector<CheckpointCandidate> again = {{500, 0, {}}, {500, 1, {}}, {400, 2, {}}};
  const auto one = ApplyCheckpointPolicy(Policy(1, "", "", 0), again);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one.count(1), 1u);
  v1::CheckpointPolicy empty;
  EXPECT_TRUE(ApplyCheckpointPolicy(empty, {}).empty());
}

TEST(CheckpointPolicyTest, ACheckpointWithoutTheMetricIsNeverBest) {
  std::vector<CheckpointCandidate> all = {{100, 0, {{"loss", 0.1}}},
                                          {200, 1, {{"test_accuracy", 0.3}}},
                                          {300, 2, {{"loss", 0.05}}},
                                          {400, 3, {}},
                                          {500, 4, {{"test_accuracy", NAN}}}};
  const auto kept = ApplyCheckpointPolicy(Policy(1, "test_accuracy", "max", 3), all);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept.at(1), std::vector<std::string>{"best"});  // the only one with a value
  EXPECT_EQ(kept.at(4), std::vector<std::string>{"last"});
}

TEST(CheckpointPolicyTest, BestCheckpointOfAJobsKeptList) {
  google::protobuf::RepeatedPtrField<v1::CheckpointInfo> kept;
  const auto add = [&kept](const std::string& path, int64_t step, std::optional<double> acc) {
    v1::CheckpointInfo* c = kept.Add();
    c->set_path(path);
    c->set_step(step);
    c->set_saved_unix_ms(step);
    if (acc) (*c->mutable_metrics())["test_accuracy"] = *acc;
  };
  add("ckpt-1000.pt", 1000, std::nullopt);
  add("ckpt-900.pt", 900, 0.81);
  add("ckpt-500.pt", 500, 0.90);
  v1::KeepBest best;
  best.set_metric("test_accuracy");
  best.set_count(1);
  ASSERT_EQ(BestCheckpoint(best, kept), std::optional<size_t>(2));
  best.set_goal("min");
  ASSERT_EQ(BestCheckpoint(best, kept), std::optional<size_t>(1));
  best.set_metric("bleu");
  EXPECT_FALSE(BestCheckpoint(best, kept).has_value());
}

}  // namespace checkpoint_spec_test
}  // namespace convoy

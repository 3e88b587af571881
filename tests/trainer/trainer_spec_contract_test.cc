// Issue 29: one contract from the spec to the trainer. The trainer is given its TrainerSpec
// as the worker gives it (CONVOY_TRAINER_SPEC and the argv of spec/trainer_argv.h). Every
// trainer field at either end of the range the spec's validator accepts is accepted by
// convoy-trainer too, and just past it the validator refuses it; and over random specs, the
// trainer accepts exactly what the validator accepts, with the values the spec gave: a spec
// accepted at submit never ends with every rank exiting 2.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "spec/job_spec.h"
#include "spec/job_spec_validation.h"
#include "spec/trainer_argv.h"
#include "spec/trainer_limits.h"
#include "spec/trainer_spec_env.h"
#include "trainer/options.h"

namespace convoy {
namespace trainer_spec_contract_test {

std::string Spec(const std::string& trainer) {
  return "name: edge\nnodes: 1\nprocs_per_node: 1\ntrainer: {" + trainer + "}\n";
}

// What convoy-trainer says of `spec` as the worker gives it ("": accepted), and its options.
std::string TrainerVerdict(const v1::JobSpec& spec, trainer::Options* o) {
  std::vector<std::string> args = BuildArgv(spec, "convoy-trainer");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  setenv(kTrainerSpecEnv, EncodeTrainerSpec(spec.trainer()).c_str(), 1);
  std::string verdict = trainer::ParseOptions(static_cast<int>(argv.size()), argv.data(), o);
  unsetenv(kTrainerSpecEnv);
  return verdict;
}

std::string TrainerVerdict(const v1::JobSpec& spec) {
  trainer::Options o;
  return TrainerVerdict(spec, &o);
}

TEST(TrainerSpecContractTest, WhatTheValidatorAcceptsTheTrainerAccepts) {
  struct Edge {
    std::string field;
    std::string lowest, highest;  // accepted by the validator
    std::string above;            // refused by it
  };
  const Edge edges[] = {
      {"epochs", "1", "10000", "10001"},
      {"max_steps", "0", "1099511627776", "1099511627777"},
      {"batch_size", "1", "65536", "65537"},
      {"lr", "1e-09", "1000", "1000.5"},
      {"momentum", "0", "0.999999", "0.9999999"},
      {"clip_grad_norm", "0", "1000000000", "10000000000"},
      {"accumulate", "1", "1024", "1025"},
      {"bucket_mb", "0.001", "1024", "1024.5"},
      {"checkpoint_every", "0", "1099511627776", "1099511627777"},
      {"snapshot_every", "0", "1099511627776", "1099511627777"},
      {"powersgd_rank", "1", "64", "65"},
      {"powersgd_start_step", "0", "1099511627776", "1099511627777"},
      {"max_bad_steps", "1", "1000000", "1000001"},
      {"seed", "0", "1099511627776", "2199023255552"},
  };
  for (const Edge& e : edges) {
    for (const std::string& ok : {e.lowest, e.highest}) {
      auto spec = ParseJobSpec(Spec(e.field + ": " + ok), "job.yaml", {});
      ASSERT_TRUE(spec.ok()) << e.field << "=" << ok << ": " << spec.status().message();
      EXPECT_EQ(TrainerVerdict(*spec), "") << e.field << "=" << ok;
    }
    auto past = ParseJobSpec(Spec(e.field + ": " + e.above), "job.yaml", {});
    ASSERT_FALSE(past.ok()) << e.field << "=" << e.above;
    EXPECT_NE(past.status().message().find("trainer." + e.field), std::string::npos)
        << past.status().message();
  }
}

// A value near the edges of [lo, hi] or anywhere in it, or just outside it.
template <typename T>
T Near(std::mt19937_64& rng, T lo, T hi) {
  const T span = hi - lo;
  switch (rng() % 6) {
    case 0:
      return lo;
    case 1:
      return hi;
    case 2:
      return lo - (std::is_integral_v<T> ? T(1) : span * T(1e-7) + T(1e-12));
    case 3:
      return hi + (std::is_integral_v<T> ? T(1) : span * T(1e-7));
    default:
      if constexpr (std::is_integral_v<T>) {
        return lo + static_cast<T>(rng() % (static_cast<uint64_t>(span) + 1));
      } else {
        return lo + span * std::uniform_real_distribution<T>(0, 1)(rng);
      }
  }
}

std::string OneOf(std::mt19937_64& rng, std::initializer_list<const char*> values) {
  return *(values.begin() + rng() % values.size());
}

// Random TrainerSpecs, each field set or not, in its range, at its edges or just past them
// (and a value no choice takes): the trainer accepts a spec exactly when the validator does,
// and then trains with the values the spec gave.
TEST(TrainerSpecContractTest, OverRandomSpecsTheTrainerAcceptsExactlyWhatTheValidatorAccepts) {
  namespace lim = trainer_limits;
  std::mt19937_64 rng(29);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    v1::JobSpec spec;
    v1::TrainerSpec& t = *spec.mutable_trainer();
    auto maybe = [&rng]() { return rng() % 5 == 0; };
    if (maybe()) t.set_model(OneOf(rng, {"fmnist-cnn", "mlp", "resnet", "vgg"}));
    if (maybe()) t.set_epochs(Near<int64_t>(rng, lim::kMinEpochs, lim::kMaxEpochs));
    if (maybe()) t.set_max_steps(Near<int64_t>(rng, 0, lim::kMaxSteps));
    if (maybe()) t.set_batch_size(Near<int64_t>(rng, 1, lim::kMaxBatchSize));
    if (maybe()) t.set_lr(Near<double>(rng, 0, lim::kMaxLr));
    if (maybe()) t.set_momentum(Near<double>(rng, 0, lim::kMaxMomentum));
    if (maybe()) t.set_optimizer(OneOf(rng, {"sgd", "adam", "lamb"}));
    if (maybe()) t.set_lr_schedule(OneOf(rng, {"none", "step", "cosine", "cyclic"}));
    if (maybe()) t.set_clip_grad_norm(Near<double>(rng, 0, lim::kMaxClipGradNorm));
    if (maybe()) t.set_accumulate(Near<int64_t>(rng, 1, lim::kMaxAccumulate));
    if (maybe()) t.set_bucket_mb(Near<double>(rng, lim::kMinBucketMb, lim::kMaxBucketMb));
    if (maybe()) t.set_checkpoint_every(Near<int64_t>(rng, 0, lim::kMaxSteps));
    if (maybe()) t.set_snapshot_every(Near<int64_t>(rng, 0, lim::kMaxSteps));
    if (maybe()) t.set_seed(Near<int64_t>(rng, 0, lim::kMaxSeed));
    if (maybe()) t.set_ddp(OneOf(rng, {"hooks", "reducer", "fsdp"}));
    if (maybe()) t.set_allreduce(OneOf(rng, {"auto", "shm", "gloo", "mpi"}));
    if (maybe()) t.set_amp(OneOf(rng, {"off", "bf16", "fp8"}));
    if (maybe()) t.set_compression(OneOf(rng, {"none", "bf16", "fp16", "powersgd", "auto", "x"}));
    if (maybe()) t.set_powersgd_rank(Near<int64_t>(rng, 1, lim::kMaxPowerSgdRank));
    if (maybe()) t.set_powersgd_start_step(Near<int64_t>(rng, 0, lim::kMaxSteps));
    if (maybe()) t.set_max_bad_steps(Near<int64_t>(rng, 1, lim::kMaxBadSteps));
    const bool valid = FindTrainerSpecProblems(t).empty();
    trainer::Options o;
    const std::string verdict = TrainerVerdict(spec, &o);
    ASSERT_EQ(verdict.empty(), valid) << t.ShortDebugString() << ": " << verdict;
    if (!valid) {
      ++refused;
      EXPECT_EQ(verdict.rfind("CONVOY_TRAINER_SPEC: trainer.", 0), 0u) << verdict;
      continue;
    }
    ++accepted;
    // The spec's value where it gives one, else the trainer's default.
    const trainer::Options d;
    EXPECT_EQ(o.lr, t.has_lr() ? t.lr() : d.lr);
    EXPECT_EQ(o.momentum, t.has_momentum() ? t.momentum() : d.momentum);
    EXPECT_EQ(o.seed, t.has_seed() ? t.seed() : d.seed);
    EXPECT_EQ(o.bucket_mb, t.has_bucket_mb() ? t.bucket_mb() : d.bucket_mb);
    EXPECT_EQ(o.max_steps, t.max_steps());
    EXPECT_EQ(o.batch_size, t.has_batch_size() ? t.batch_size() : d.batch_size);
    EXPECT_EQ(o.compression, t.compression().empty() ? d.compression : t.compression());
    EXPECT_EQ(o.snapshot_every, t.has_snapshot_every() ? t.snapshot_every() : d.snapshot_every);
    EXPECT_EQ(o.max_bad_steps, t.has_max_bad_steps() ? t.max_bad_steps() : d.max_bad_steps);
  }
  // The default the coordinator states (its bad-step events) is the trainer's.
  EXPECT_EQ(trainer::Options().max_bad_steps, trainer_limits::kDefaultMaxBadSteps);
  // Both sides of the contract were exercised.
  EXPECT_GT(accepted, 300);
  EXPECT_GT(refused, 300);
}

// extra_args come after the spec's fields and set any flag, as documented.
TEST(TrainerSpecContractTest, ExtraArgsOverrideTheSpecsFields) {
  auto spec =
      ParseJobSpec(Spec("lr: 0.5, extra_args: ['--lr', '0.25', '--threads', '1']"), "job.yaml", {});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  trainer::Options o;
  ASSERT_EQ(TrainerVerdict(*spec, &o), "");
  EXPECT_EQ(o.lr, 0.25);
  EXPECT_EQ(o.threads, 1);
}

}  // namespace trainer_spec_contract_test
}  // namespace convoy

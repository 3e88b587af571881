// Issue 29: one contract from the spec to the trainer. Every trainer field at either end of
// the range the spec's validator accepts is accepted by convoy-trainer's own flags too (the
// argv the worker builds, spec/trainer_argv.h), and just past it the validator refuses it:
// a spec accepted at submit never ends with every rank exiting 2.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spec/job_spec.h"
#include "spec/trainer_argv.h"
#include "trainer/options.h"

namespace convoy {
namespace {

std::string Spec(const std::string& trainer) {
  return "name: edge\nnodes: 1\nprocs_per_node: 1\ntrainer: {" + trainer + "}\n";
}

// What convoy-trainer says of the argv the worker builds for `spec` ("": accepted).
std::string TrainerVerdict(const v1::JobSpec& spec) {
  std::vector<std::string> args = BuildArgv(spec, "convoy-trainer");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  trainer::Options o;
  return trainer::ParseOptions(static_cast<int>(argv.size()), argv.data(), &o);
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

}  // namespace
}  // namespace convoy

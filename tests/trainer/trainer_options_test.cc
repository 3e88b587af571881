// convoy-trainer's flags: every written value must be valid; only an absent flag takes the
// default (there is no "0 means the default").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trainer/options.h"

namespace convoy::trainer {
namespace trainer_options_test {

std::string Parse(std::vector<std::string> args, Options* o) {
  args.insert(args.begin(), "convoy-trainer");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ParseOptions(static_cast<int>(argv.size()), argv.data(), o);
}

TEST(TrainerOptionsTest, AbsentFlagsTakeTheDefaults) {
  Options o;
  ASSERT_EQ(Parse({}, &o), "");
  EXPECT_EQ(o.epochs, 1);
  EXPECT_EQ(o.batch_size, 32);
  EXPECT_EQ(o.accumulate, 1);
  EXPECT_EQ(o.threads, 0);  // chosen at start: OMP_NUM_THREADS, else cores per rank
}

TEST(TrainerOptionsTest, WrittenZerosAreRefusedWhereZeroWasADefault) {
  for (const char* flag :
       {"--epochs", "--batch-size", "--accumulate", "--bucket-mb", "--threads", "--log-every"}) {
    Options o;
    const std::string err = Parse({flag, "0"}, &o);
    EXPECT_EQ(err.rfind(std::string(flag) + ":", 0), 0u) << flag << " 0 gave '" << err << "'";
  }
}

TEST(TrainerOptionsTest, ZerosThatAreValuesAreKept) {
  Options o;
  ASSERT_EQ(Parse({"--momentum", "0", "--seed", "0", "--max-steps", "0", "--train-limit", "0"}, &o),
            "");
  EXPECT_EQ(o.momentum, 0);
  EXPECT_EQ(o.seed, 0);
}

TEST(TrainerOptionsTest, Compression) {
  Options o;
  ASSERT_EQ(Parse({}, &o), "");
  EXPECT_EQ(o.compression, "none");
  EXPECT_EQ(o.powersgd_rank, 2);
  EXPECT_EQ(o.powersgd_start_step, 0);
  ASSERT_EQ(
      Parse({"--compression", "powersgd", "--powersgd-rank", "4", "--powersgd-start-step", "10"},
            &o),
      "");
  EXPECT_EQ(o.compression, "powersgd");
  EXPECT_EQ(o.powersgd_rank, 4);
  EXPECT_EQ(o.powersgd_start_step, 10);
  Options bad;
  EXPECT_EQ(Parse({"--compression", "int8"}, &bad).rfind("--compression: expected one of", 0), 0u);
  EXPECT_EQ(Parse({"--powersgd-rank", "0"}, &bad).rfind("--powersgd-rank:", 0), 0u);
  EXPECT_EQ(Parse({"--ddp", "reducer", "--compression", "bf16"}, &bad).rfind("--compression:", 0),
            0u);
}

TEST(TrainerOptionsTest, SnapshotsAndTheMaxWorldSize) {
  Options o;
  ASSERT_EQ(Parse({}, &o), "");
  EXPECT_EQ(o.snapshot_every, -1);  // absent: auto
  EXPECT_EQ(o.max_world_size, o.world_size);
  ASSERT_EQ(Parse({"--snapshot-every", "0", "--snapshot-dir", "/dev/shm/j"}, &o), "");
  EXPECT_EQ(o.snapshot_every, 0);  // a written 0 is "off", not the default
  EXPECT_EQ(o.snapshot_dir, "/dev/shm/j");
  Options m;
  EXPECT_EQ(Parse({"--max-world-size", "0"}, &m).rfind("--max-world-size:", 0), 0u);
  setenv("WORLD_SIZE", "3", 1);
  setenv("CONVOY_MAX_WORLD_SIZE", "2", 1);
  Options below;
  EXPECT_EQ(Parse({}, &below), "CONVOY_MAX_WORLD_SIZE: 2 is below WORLD_SIZE 3");
  setenv("CONVOY_MAX_WORLD_SIZE", "6", 1);
  Options six;
  EXPECT_EQ(Parse({}, &six), "");
  EXPECT_EQ(six.max_world_size, 6);
  Options flag;
  EXPECT_EQ(Parse({"--max-world-size", "4"}, &flag), "");  // the flag wins over the variable
  EXPECT_EQ(flag.max_world_size, 4);
  unsetenv("WORLD_SIZE");
  unsetenv("CONVOY_MAX_WORLD_SIZE");
}

}  // namespace trainer_options_test
}  // namespace convoy::trainer

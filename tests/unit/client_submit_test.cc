// `convoy submit`: the spec from a file, standard input, or the command line.
#include <gtest/gtest.h>

#include <sstream>

#include "client/commands.h"

namespace convoy {
namespace client_submit_test {

TEST(ClientSubmitTest, ACommandAfterDashDashNeedsNoSpecFile) {
  SubmitArgs args;
  args.nodes = 2;
  args.procs_per_node = 1;
  args.command = {"python3", "train.py", "--epochs", "1"};
  std::istringstream in;
  auto spec = BuildSubmitSpec(args, in);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->name(), "job");
  EXPECT_EQ(spec->nodes(), 2);
  EXPECT_EQ(spec->procs_per_node(), 1);
  ASSERT_EQ(spec->command_size(), 4);
  EXPECT_EQ(spec->command(3), "1");
  EXPECT_FALSE(spec->has_trainer());
}

TEST(ClientSubmitTest, DashReadsTheSpecFromStandardInputAndFlagsOverrideIt) {
  SubmitArgs args;
  args.file = "-";
  args.nodes = 3;
  args.name = "renamed";
  std::istringstream in("name: piped\nnodes: 1\nprocs_per_node: 2\ncommand: [echo, hi]\n");
  auto spec = BuildSubmitSpec(args, in);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->name(), "renamed");
  EXPECT_EQ(spec->nodes(), 3);
  EXPECT_EQ(spec->procs_per_node(), 2);

  std::istringstream bad("name: piped\nnodes: x\n");
  auto refused = BuildSubmitSpec(args, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("<stdin>", 0), 0u) << refused.status().message();
}

TEST(ClientSubmitTest, UsageErrors) {
  std::istringstream in;
  SubmitArgs nothing;
  auto a = BuildSubmitSpec(nothing, in);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("after '--'"), std::string::npos);
  SubmitArgs both;
  both.file = "-";
  both.command = {"true"};
  EXPECT_FALSE(BuildSubmitSpec(both, in).ok());
  SubmitArgs bad_name;
  bad_name.name = "no spaces allowed";
  bad_name.command = {"true"};
  auto n = BuildSubmitSpec(bad_name, in);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("name"), std::string::npos);
}

// Issue 32: --set FIELD=VALUE on a file, on standard input and on a command after `--`.
TEST(ClientSubmitTest, SetOverridesFieldsOfAnySpec) {
  SubmitArgs args;
  args.file = "-";
  args.sets = {"trainer.max_steps=300", "env.OMP_NUM_THREADS=2", "nodes=4"};
  args.nodes = 2;  // the flag wins over --set
  std::istringstream in("name: piped\nnodes: 1\nprocs_per_node: 1\ntrainer: {epochs: 1}\n");
  auto spec = BuildSubmitSpec(args, in);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->trainer().max_steps(), 300);
  EXPECT_EQ(spec->env().at("OMP_NUM_THREADS"), "2");
  EXPECT_EQ(spec->nodes(), 2);

  args.sets = {"trainer.max_step=300"};
  std::istringstream again("name: piped\nnodes: 1\nprocs_per_node: 1\ntrainer: {epochs: 1}\n");
  auto refused = BuildSubmitSpec(args, again);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "--set trainer.max_step=300: trainer.max_step: unknown field; did you mean "
            "'max_steps'?");

  SubmitArgs command;
  command.command = {"python3", "train.py"};
  command.sets = {"nodes=3", "max_restarts=2", "env.A=1"};
  std::istringstream none;
  spec = BuildSubmitSpec(command, none);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->nodes(), 3);
  EXPECT_EQ(spec->max_restarts(), 2);
  EXPECT_EQ(spec->env().at("A"), "1");
  EXPECT_EQ(spec->command_size(), 2);
  command.sets = {"max_restarts=lots"};
  refused = BuildSubmitSpec(command, none);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "--set max_restarts=lots: max_restarts: expected an integer, got 'lots'");
}

}  // namespace client_submit_test
}  // namespace convoy

// Table-driven tests of job-spec parsing and validation: every bad spec names its field.
#include "common/job_spec.h"

#include <gtest/gtest.h>

#include "common/job_spec_validation.h"

namespace convoy {
namespace {

const char* kDemo = R"(
name: fmnist-cnn
nodes: 2
procs_per_node: 2
backend: gloo
trainer:
  model: fmnist-cnn
  epochs: 3
  batch_size: 32
  lr: 0.01
env: {OMP_NUM_THREADS: "1", SEED: 7}
max_restarts: 3
checkpoint_dir: /var/lib/convoy/checkpoints/fmnist-cnn
hang_timeout: 30
)";

TEST(ParseJobSpecTest, TheDesignDocumentsSpec) {
  auto spec = ParseJobSpec(kDemo, "demo.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->name(), "fmnist-cnn");
  EXPECT_EQ(spec->nodes(), 2);
  EXPECT_EQ(spec->procs_per_node(), 2);
  EXPECT_TRUE(spec->has_trainer());
  EXPECT_EQ(spec->trainer().epochs(), 3);
  EXPECT_DOUBLE_EQ(spec->trainer().lr(), 0.01);
  EXPECT_EQ(spec->env().at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(spec->env().at("SEED"), "7");
  EXPECT_EQ(spec->max_restarts(), 3);
  EXPECT_EQ(spec->hang_timeout_s(), 30);
}

TEST(ParseJobSpecTest, JsonCommandAndGpu) {
  auto spec = ParseJobSpec(
      R"js({"name": "py", "nodes": 1, "procs_per_node": "gpu", "backend": "nccl",
          "command": ["python3", "train.py", "--epochs", "1", "$(not a shell)"]})js",
      "job.json");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->procs_per_node_gpu());
  EXPECT_FALSE(spec->has_trainer());
  ASSERT_EQ(spec->command_size(), 5);
  EXPECT_EQ(spec->command(4), "$(not a shell)");
}

TEST(ParseJobSpecTest, EmptyTrainerMappingMeansDefaults) {
  auto spec = ParseJobSpec("name: t\nnodes: 1\nprocs_per_node: 1\ntrainer: {}\n", "t.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->has_trainer());
}

struct BadCase {
  const char* what;
  std::string yaml;
  const char* field;  // must appear in the message, followed by ':'
};

std::string Base(const std::string& extra, const std::string& trainer = "trainer: {}\n") {
  return "name: t\nnodes: 1\nprocs_per_node: 1\n" + trainer + extra;
}

TEST(ParseJobSpecTest, BadSpecsNameTheirField) {
  const BadCase cases[] = {
      {"unknown top-level field", Base("colour: red\n"), "colour"},
      {"unknown trainer field", Base("", "trainer: {batch_sise: 32}\n"), "trainer.batch_sise"},
      {"string for int", "name: t\nnodes: two\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"quoted int", "name: t\nnodes: \"2\"\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"float for int", "name: t\nnodes: 1.5\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"zero nodes", "name: t\nnodes: 0\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"huge nodes", "name: t\nnodes: 99999999999999999999\nprocs_per_node: 1\ntrainer: {}\n",
       "nodes"},
      {"negative procs", "name: t\nnodes: 1\nprocs_per_node: -1\ntrainer: {}\n", "procs_per_node"},
      {"procs word", "name: t\nnodes: 1\nprocs_per_node: many\ntrainer: {}\n", "procs_per_node"},
      {"missing name", "nodes: 1\nprocs_per_node: 1\ntrainer: {}\n", "name"},
      {"bad name", "name: ../etc\nnodes: 1\nprocs_per_node: 1\ntrainer: {}\n", "name"},
      {"missing nodes", "name: t\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"bad backend", Base("backend: mpi\n"), "backend"},
      {"both trainer and command", Base("command: [\"true\"]\n"), "command"},
      {"neither", "name: t\nnodes: 1\nprocs_per_node: 1\n", "command"},
      {"command as string", "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: python3 x.py\n",
       "command"},
      {"command of lists", "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: [[a]]\n", "command[0]"},
      {"empty program", "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: [\"\"]\n", "command[0]"},
      {"zero batch", Base("", "trainer: {batch_size: 0}\n"), "trainer.batch_size"},
      {"negative lr", Base("", "trainer: {lr: -0.1}\n"), "trainer.lr"},
      {"nan lr", Base("", "trainer: {lr: .nan}\n"), "trainer.lr"},
      {"momentum 1", Base("", "trainer: {momentum: 1.0}\n"), "trainer.momentum"},
      {"bad model", Base("", "trainer: {model: gpt5}\n"), "trainer.model"},
      {"bad optimizer", Base("", "trainer: {optimizer: lbfgs}\n"), "trainer.optimizer"},
      {"bad schedule", Base("", "trainer: {lr_schedule: linear}\n"), "trainer.lr_schedule"},
      {"relative data dir", Base("", "trainer: {data_dir: data}\n"), "trainer.data_dir"},
      {"reserved env", Base("env: {RANK: \"3\"}\n"), "env.RANK"},
      {"reserved env prefix", Base("env: {CONVOY_JOB_ID: x}\n"), "env.CONVOY_JOB_ID"},
      {"bad env name", Base("env: {\"A-B\": x}\n"), "env.A-B"},
      {"env list", Base("env: [A]\n"), "env"},
      {"env nested", Base("env: {A: [1]}\n"), "env.A"},
      {"restarts", Base("max_restarts: 1000\n"), "max_restarts"},
      {"negative hang", Base("hang_timeout: -5\n"), "hang_timeout"},
      {"traversal", Base("checkpoint_dir: /var/lib/../../etc\n"), "checkpoint_dir"},
      {"relative working dir", Base("working_dir: here\n"), "working_dir"},
      {"elastic", "name: t\nmin_nodes: 1\nmax_nodes: 2\nprocs_per_node: 1\ntrainer: {}\n",
       "min_nodes"},
      {"duplicate key", Base("max_restarts: 1\nmax_restarts: 2\n"), "max_restarts"},
      {"not a mapping", "- a\n- b\n", "spec"},
  };
  for (const BadCase& c : cases) {
    auto spec = ParseJobSpec(c.yaml, "job.yaml");
    ASSERT_FALSE(spec.ok()) << c.what;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << c.what;
    const std::string& msg = spec.status().message();
    EXPECT_EQ(msg.rfind("job.yaml: ", 0), 0u) << c.what << ": " << msg;
    EXPECT_NE(msg.find(std::string(c.field) + ":"), std::string::npos)
        << c.what << ": expected field '" << c.field << "' in: " << msg;
  }
}

TEST(ParseJobSpecTest, SyntaxErrorsGiveLineAndColumn) {
  auto spec = ParseJobSpec("name: t\nnodes: [1\n", "broken.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("line "), std::string::npos) << spec.status().message();
}

TEST(ParseJobSpecTest, OversizedAndMissingFiles) {
  EXPECT_FALSE(ParseJobSpec(std::string(kMaxSpecBytes + 1, '#'), "big.yaml").ok());
  auto missing = LoadJobSpecFile("/nonexistent/job.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/job.yaml"), std::string::npos);
}

TEST(ValidateJobSpecTest, RpcSpecsAreCheckedToo) {
  v1::JobSpec spec;  // what a hand-written RPC could send
  spec.set_name("x");
  spec.set_nodes(2000);
  spec.set_procs_per_node(1);
  spec.add_command("true");
  Status st = ValidateJobSpec(spec);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("nodes:", 0), 0u);
  spec.set_nodes(1);
  spec.set_procs_per_node(0);
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("procs_per_node:", 0), 0u);
  spec.set_procs_per_node(1);
  spec.set_command(0, std::string("a\0b", 3));
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("command[0]:", 0), 0u);
  spec.set_command(0, "true");
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

}  // namespace
}  // namespace convoy

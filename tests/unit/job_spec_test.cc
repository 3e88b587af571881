// Table-driven tests of job-spec parsing and validation: good specs parse to the expected
// JobSpec; every bad spec is refused with a message that names exactly its field.
#include "spec/job_spec.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>

#include "spec/job_spec_validation.h"
#include "spec/trainer_spec_env.h"

namespace convoy {
namespace job_spec_test {

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

// The directory of the repository's examples/ (CMake passes the source root: __FILE__ may be
// relative, under ccache's base_dir for one).
std::string ExamplesDir() { return std::string(CONVOY_SOURCE_DIR) + "/examples/"; }

TEST(ParseJobSpecTest, TheDesignDocumentsSpec) {
  auto spec = ParseJobSpec(kDemo, "demo.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->name(), "fmnist-cnn");
  EXPECT_EQ(spec->nodes(), 2);
  EXPECT_EQ(spec->procs_per_node(), 2);
  EXPECT_FALSE(spec->procs_per_node_gpu());
  EXPECT_EQ(spec->backend(), "gloo");
  ASSERT_TRUE(spec->has_trainer());
  EXPECT_EQ(spec->trainer().model(), "fmnist-cnn");
  EXPECT_EQ(spec->trainer().epochs(), 3);
  EXPECT_EQ(spec->trainer().batch_size(), 32);
  EXPECT_DOUBLE_EQ(spec->trainer().lr(), 0.01);
  EXPECT_EQ(spec->command_size(), 0);
  EXPECT_EQ(spec->env().at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(spec->env().at("SEED"), "7");
  EXPECT_EQ(spec->max_restarts(), 3);
  EXPECT_EQ(spec->checkpoint_dir(), "/var/lib/convoy/checkpoints/fmnist-cnn");
  EXPECT_EQ(spec->hang_timeout_s(), 30);
}

TEST(ParseJobSpecTest, EveryTrainerField) {
  auto spec = ParseJobSpec(R"(
name: all
nodes: 1
procs_per_node: 1
trainer:
  model: resnet
  epochs: 10000
  max_steps: 5000000000
  batch_size: 65536
  lr: 1e-3
  momentum: 0.95
  optimizer: adam
  lr_schedule: cosine
  clip_grad_norm: 1
  accumulate: 1024
  bucket_mb: 25.5
  checkpoint_every: 100
  data_dir: /data/fashion-mnist
  seed: 42
  ddp: reducer
  allreduce: gloo
  amp: "off"
  extra_args: [--log-every, 10]
working_dir: /srv/runs/all
resume_from: j-000007
)",
                           "all.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const v1::TrainerSpec& t = spec->trainer();
  EXPECT_EQ(t.model(), "resnet");
  EXPECT_EQ(t.epochs(), 10000);
  EXPECT_EQ(t.max_steps(), 5000000000);
  EXPECT_EQ(t.batch_size(), 65536);
  EXPECT_DOUBLE_EQ(t.lr(), 1e-3);
  EXPECT_DOUBLE_EQ(t.momentum(), 0.95);
  EXPECT_EQ(t.optimizer(), "adam");
  EXPECT_EQ(t.lr_schedule(), "cosine");
  EXPECT_DOUBLE_EQ(t.clip_grad_norm(), 1);
  EXPECT_EQ(t.accumulate(), 1024);
  EXPECT_DOUBLE_EQ(t.bucket_mb(), 25.5);
  EXPECT_EQ(t.checkpoint_every(), 100);
  EXPECT_EQ(t.data_dir(), "/data/fashion-mnist");
  EXPECT_EQ(t.seed(), 42);
  EXPECT_EQ(t.ddp(), "reducer");
  EXPECT_EQ(t.allreduce(), "gloo");
  EXPECT_EQ(t.amp(), "off");
  ASSERT_EQ(t.extra_args_size(), 2);
  EXPECT_EQ(t.extra_args(1), "10");
  EXPECT_EQ(spec->working_dir(), "/srv/runs/all");
  EXPECT_EQ(spec->resume_from(), "j-000007");
  EXPECT_TRUE(IsJobIdLike(spec->resume_from()));
  EXPECT_FALSE(IsJobIdLike("j-"));
  EXPECT_FALSE(IsJobIdLike("checkpoints/j-1"));
}

TEST(ParseJobSpecTest, JsonCommandAndGpu) {
  auto spec = ParseJobSpec(
      R"js({"name": "py", "nodes": 1, "procs_per_node": "gpu", "backend": "nccl",
          "command": ["python3", "train.py", "--epochs", "1", "$(not a shell)"]})js",
      "job.json");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->procs_per_node_gpu());
  EXPECT_EQ(spec->procs_per_node(), 0);
  EXPECT_FALSE(spec->has_trainer());
  ASSERT_EQ(spec->command_size(), 5);
  EXPECT_EQ(spec->command(4), "$(not a shell)");
}

// Specs that must parse; `check` looks at what they became.
struct GoodCase {
  const char* what;
  std::string text;
  std::function<void(const v1::JobSpec&)> check;
};

std::string Base(const std::string& extra, const std::string& trainer = "trainer: {}\n") {
  return "name: t\nnodes: 1\nprocs_per_node: 1\n" + trainer + extra;
}

TEST(ParseJobSpecTest, GoodSpecs) {
  const GoodCase cases[] = {
      {"empty trainer mapping", Base(""), [](auto& s) { EXPECT_TRUE(s.has_trainer()); }},
      {"trainer with nothing after it", Base("", "trainer:\n"),
       [](auto& s) { EXPECT_TRUE(s.has_trainer()); }},
      {"backend defaults to gloo", Base(""), [](auto& s) { EXPECT_EQ(s.backend(), "gloo"); }},
      {"backend auto", Base("backend: auto\n"), [](auto& s) { EXPECT_EQ(s.backend(), "auto"); }},
      {"absent fields take the defaults", Base(""),
       [](auto& s) {
         EXPECT_FALSE(s.trainer().has_epochs());
         EXPECT_FALSE(s.trainer().has_batch_size());
         EXPECT_FALSE(s.trainer().has_accumulate());
         EXPECT_FALSE(s.trainer().has_momentum());
       }},
      {"zeros that are values, not defaults",
       Base("", "trainer: {momentum: 0, seed: 0, max_steps: 0, checkpoint_every: 0}\n"),
       [](auto& s) {
         EXPECT_TRUE(s.trainer().has_momentum());
         EXPECT_TRUE(s.trainer().has_seed());
       }},
      {"integers where numbers are expected", Base("", "trainer: {lr: 1, momentum: 0}\n"),
       [](auto& s) { EXPECT_DOUBLE_EQ(s.trainer().lr(), 1.0); }},
      {"quoted gpu", "name: g\nnodes: 2\nprocs_per_node: \"gpu\"\ntrainer: {}\n",
       [](auto& s) { EXPECT_TRUE(s.procs_per_node_gpu()); }},
      {"largest world", "name: big\nnodes: 1024\nprocs_per_node: 64\ncommand: [x]\n",
       [](auto& s) { EXPECT_EQ(s.nodes() * s.procs_per_node(), 65536); }},
      {"scalars in a command are text",
       "name: c\nnodes: 1\nprocs_per_node: 1\ncommand: [sleep, 10]",
       [](auto& s) { EXPECT_EQ(s.command(1), "10"); }},
      {"env values of any scalar type", Base("env: {A: 1, B: true, C: 0.5, d_lower: x}\n"),
       [](auto& s) {
         EXPECT_EQ(s.env().at("A"), "1");
         EXPECT_EQ(s.env().at("B"), "true");
         EXPECT_EQ(s.env().at("C"), "0.5");
       }},
      {"empty env", Base("env: {}\n"), [](auto& s) { EXPECT_TRUE(s.env().empty()); }},
      {"elastic", "name: t\nmin_nodes: 2\nmax_nodes: 3\nprocs_per_node: 1\ntrainer: {}\n",
       [](auto& s) {
         EXPECT_TRUE(IsElastic(s));
         EXPECT_EQ(MinNodes(s), 2);
         EXPECT_EQ(MaxNodes(s), 3);
         EXPECT_EQ(s.nodes(), 0);
       }},
      {"fixed size", Base(""),
       [](auto& s) {
         EXPECT_FALSE(IsElastic(s));
         EXPECT_EQ(MinNodes(s), 1);
         EXPECT_EQ(MaxNodes(s), 1);
       }},
      {"resources and selector",
       Base("gpus_per_proc: 2\ncpus_per_proc: 8\nmemory_per_proc: 16Gi\n"
            "node_selector: {zone: a, example.com/gpu-model: h100}\npreemptible: false\n"),
       [](auto& s) {
         EXPECT_EQ(s.gpus_per_proc(), 2);
         EXPECT_EQ(s.cpus_per_proc(), 8);
         EXPECT_EQ(s.memory_per_proc_bytes(), int64_t{16} << 30);
         EXPECT_EQ(s.node_selector().at("zone"), "a");
         EXPECT_EQ(s.node_selector().at("example.com/gpu-model"), "h100");
         EXPECT_TRUE(s.has_preemptible());
         EXPECT_FALSE(s.preemptible());
       }},
      {"memory units", Base("memory_per_proc: 512Mi\n"),
       [](auto& s) { EXPECT_EQ(s.memory_per_proc_bytes(), int64_t{512} << 20); }},
      {"memory in decimal units", Base("memory_per_proc: 2G\n"),
       [](auto& s) { EXPECT_EQ(s.memory_per_proc_bytes(), 2000000000); }},
      {"memory in bytes", Base("memory_per_proc: 1048576\n"),
       [](auto& s) { EXPECT_EQ(s.memory_per_proc_bytes(), 1048576); }},
      {"preemptible absent", Base(""), [](auto& s) { EXPECT_FALSE(s.has_preemptible()); }},
      {"snapshot_every 0 is off, not the default", Base("", "trainer: {snapshot_every: 0}\n"),
       [](auto& s) {
         EXPECT_TRUE(s.trainer().has_snapshot_every());
         EXPECT_EQ(s.trainer().snapshot_every(), 0);
       }},
      {"limits", Base("max_restarts: 100\nhang_timeout: 604800\n"),
       [](auto& s) { EXPECT_EQ(s.hang_timeout_s(), 604800); }},
      {"dots inside a path component", Base("checkpoint_dir: /ckpt/..hidden/a..b/./c\n"),
       [](auto& s) { EXPECT_EQ(s.checkpoint_dir(), "/ckpt/..hidden/a..b/./c"); }},
      {"name with dots and dashes",
       "name: resnet.v2_run-1\nnodes: 1\nprocs_per_node: 1\n"
       "trainer: {model: resnet}\n",
       [](auto& s) { EXPECT_EQ(s.name(), "resnet.v2_run-1"); }},
      {"comments, anchors and block lists",
       "# a comment\nname: &n t\nnodes: 1 # inline\nprocs_per_node: 1\ncommand:\n  - echo\n"
       "  - *n\n",
       [](auto& s) { EXPECT_EQ(s.command(1), "t"); }},
      {"compact JSON", R"({"name":"j","nodes":1,"procs_per_node":1,"trainer":{"lr":0.5}})",
       [](auto& s) { EXPECT_DOUBLE_EQ(s.trainer().lr(), 0.5); }},
      {"JSON with tabs and escapes",
       "{\n\t\"name\": \"j\",\n\t\"nodes\": 1,\n\t\"procs_per_node\": 1,\n"
       "\t\"command\": [\"echo\", \"a\\/b\\u00e9\\t\"]\n}\n",
       [](auto& s) { EXPECT_EQ(s.command(1), "a/b\xc3\xa9\t"); }},
  };
  for (const GoodCase& c : cases) {
    auto spec = ParseJobSpec(c.text, "good.yaml");
    ASSERT_TRUE(spec.ok()) << c.what << ": " << spec.status().message();
    c.check(*spec);
  }
}

struct BadCase {
  const char* what;
  std::string text;
  const char* field;  // the field the message must name
};

TEST(ParseJobSpecTest, BadSpecsNameTheirField) {
  const std::string long_arg(64 * 1024 + 1, 'a');
  const BadCase cases[] = {
      // Shape of the document.
      {"unknown top-level field", Base("colour: red\n"), "colour"},
      {"unknown trainer field", Base("", "trainer: {batch_sise: 32}\n"), "trainer.batch_sise"},
      {"proto name instead of the spec's", Base("hang_timeout_s: 5\n"), "hang_timeout_s"},
      {"not a mapping", "- a\n- b\n", "spec"},
      {"duplicate key", Base("max_restarts: 1\nmax_restarts: 2\n"), "max_restarts"},
      {"duplicate trainer key", Base("", "trainer: {lr: 0.1, lr: 0.2}\n"), "trainer.lr"},
      {"duplicate env key", Base("env: {A: 1, A: 2}\n"), "env.A"},
      {"JSON duplicate key", R"({"name": "j", "nodes": 1, "nodes": 2})", "nodes"},
      {"max_nodes beside nodes", Base("max_nodes: 4\n"), "max_nodes"},
      {"min_nodes beside nodes", Base("min_nodes: 1\n"), "min_nodes"},
      {"max_nodes alone", "name: t\nmax_nodes: 2\nprocs_per_node: 1\ntrainer: {}\n", "min_nodes"},
      {"min_nodes alone", "name: t\nmin_nodes: 2\nprocs_per_node: 1\ntrainer: {}\n", "max_nodes"},
      {"max below min", "name: t\nmin_nodes: 3\nmax_nodes: 2\nprocs_per_node: 1\ntrainer: {}\n",
       "max_nodes"},
      {"zero min_nodes", "name: t\nmin_nodes: 0\nmax_nodes: 2\nprocs_per_node: 1\ntrainer: {}\n",
       "min_nodes"},
      {"resize_interval of a fixed job", Base("resize_interval: 30\n"), "resize_interval"},
      {"preemptible as text", Base("preemptible: \"yes\"\n"), "preemptible"},
      {"preemptible as a number", Base("preemptible: 1\n"), "preemptible"},
      {"memory without digits", Base("memory_per_proc: Gi\n"), "memory_per_proc"},
      {"memory in an unknown unit", Base("memory_per_proc: 4GB\n"), "memory_per_proc"},
      {"memory that overflows", Base("memory_per_proc: 99999999999Ti\n"), "memory_per_proc"},
      {"memory past 1 PiB", Base("memory_per_proc: 2048Ti\n"), "memory_per_proc"},
      {"negative gpus", Base("gpus_per_proc: -1\n"), "gpus_per_proc"},
      {"too many gpus", Base("gpus_per_proc: 65\n"), "gpus_per_proc"},
      {"negative cpus", Base("cpus_per_proc: -2\n"), "cpus_per_proc"},
      {"node_selector as a list", Base("node_selector: [a]\n"), "node_selector"},
      {"bad label name", Base("node_selector: {\"-zone\": a}\n"), "node_selector.-zone"},
      {"bad label value", Base("node_selector: {zone: \"a b\"}\n"), "node_selector.zone"},
      {"negative snapshot_every", Base("", "trainer: {snapshot_every: -1}\n"),
       "trainer.snapshot_every"},
      // name
      {"missing name", "nodes: 1\nprocs_per_node: 1\ntrainer: {}\n", "name"},
      {"null name", Base("").replace(0, 7, "name:\n"), "name"},
      {"list name", Base("").replace(0, 7, "name: [a]\n"), "name"},
      {"traversal name", Base("").replace(0, 7, "name: ../etc\n"), "name"},
      {"name starting with a dash", Base("").replace(0, 7, "name: -x\n"), "name"},
      {"64-character name", Base("").replace(0, 7, "name: " + std::string(64, 'n') + "\n"), "name"},
      // nodes and procs_per_node
      {"missing nodes", "name: t\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"string for int", "name: t\nnodes: two\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"quoted int", "name: t\nnodes: \"2\"\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"float for int", "name: t\nnodes: 1.5\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"float with zero fraction", "name: t\nnodes: 2.0\nprocs_per_node: 1\ntrainer: {}\n",
       "nodes"},
      {"zero nodes", "name: t\nnodes: 0\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"16385 nodes", "name: t\nnodes: 16385\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"int32 overflow", "name: t\nnodes: 2147483648\nprocs_per_node: 1\ntrainer: {}\n", "nodes"},
      {"huge nodes", "name: t\nnodes: 99999999999999999999\nprocs_per_node: 1\ntrainer: {}\n",
       "nodes"},
      {"wraps to 1 in 32 bits", "name: t\nnodes: 4294967297\nprocs_per_node: 1\ntrainer: {}\n",
       "nodes"},
      {"missing procs", "name: t\nnodes: 1\ntrainer: {}\n", "procs_per_node"},
      {"negative procs", "name: t\nnodes: 1\nprocs_per_node: -1\ntrainer: {}\n", "procs_per_node"},
      {"257 procs", "name: t\nnodes: 1\nprocs_per_node: 257\ntrainer: {}\n", "procs_per_node"},
      {"procs word", "name: t\nnodes: 1\nprocs_per_node: many\ntrainer: {}\n", "procs_per_node"},
      {"quoted procs", "name: t\nnodes: 1\nprocs_per_node: \"4\"\ntrainer: {}\n", "procs_per_node"},
      {"world too big", "name: t\nnodes: 1024\nprocs_per_node: 65\ntrainer: {}\n",
       "procs_per_node"},
      // backend
      {"bad backend", Base("backend: mpi\n"), "backend"},
      {"backend in capitals", Base("backend: NCCL\n"), "backend"},
      // trainer
      {"both trainer and command", Base("command: [\"true\"]\n"), "command"},
      {"neither", "name: t\nnodes: 1\nprocs_per_node: 1\n", "command"},
      {"trainer as a string", Base("", "trainer: fmnist\n"), "trainer"},
      {"trainer as a list", Base("", "trainer: [1]\n"), "trainer"},
      {"bad model", Base("", "trainer: {model: gpt5}\n"), "trainer.model"},
      {"negative epochs", Base("", "trainer: {epochs: -1}\n"), "trainer.epochs"},
      // A written 0 is not "the default": only an absent field is.
      {"epochs 0", Base("", "trainer: {epochs: 0}\n"), "trainer.epochs"},
      {"batch_size 0", Base("", "trainer: {batch_size: 0}\n"), "trainer.batch_size"},
      {"accumulate 0", Base("", "trainer: {accumulate: 0}\n"), "trainer.accumulate"},
      {"lr 0", Base("", "trainer: {lr: 0}\n"), "trainer.lr"},
      {"lr 0.0", Base("", "trainer: {lr: 0.0}\n"), "trainer.lr"},
      {"bucket_mb 0", Base("", "trainer: {bucket_mb: 0}\n"), "trainer.bucket_mb"},
      {"lr past the trainer's limit", Base("", "trainer: {lr: 1001}\n"), "trainer.lr"},
      {"too many epochs", Base("", "trainer: {epochs: 10001}\n"), "trainer.epochs"},
      {"negative max_steps", Base("", "trainer: {max_steps: -1}\n"), "trainer.max_steps"},
      {"float max_steps", Base("", "trainer: {max_steps: 1e3}\n"), "trainer.max_steps"},
      {"negative batch", Base("", "trainer: {batch_size: -32}\n"), "trainer.batch_size"},
      {"huge batch", Base("", "trainer: {batch_size: 65537}\n"), "trainer.batch_size"},
      {"word batch", Base("", "trainer:\n  batch_size: abc\n"), "trainer.batch_size"},
      {"negative lr", Base("", "trainer: {lr: -0.1}\n"), "trainer.lr"},
      {"nan lr", Base("", "trainer: {lr: .nan}\n"), "trainer.lr"},
      {"inf lr", Base("", "trainer: {lr: inf}\n"), "trainer.lr"},
      {"overflowing lr", Base("", "trainer: {lr: 1e400}\n"), "trainer.lr"},
      {"quoted lr", Base("", "trainer: {lr: \"0.1\"}\n"), "trainer.lr"},
      {"momentum 1", Base("", "trainer: {momentum: 1.0}\n"), "trainer.momentum"},
      {"negative momentum", Base("", "trainer: {momentum: -0.1}\n"), "trainer.momentum"},
      {"bad optimizer", Base("", "trainer: {optimizer: lbfgs}\n"), "trainer.optimizer"},
      {"bad schedule", Base("", "trainer: {lr_schedule: linear}\n"), "trainer.lr_schedule"},
      {"bad ddp", Base("", "trainer: {ddp: fsdp}\n"), "trainer.ddp"},
      {"bad allreduce", Base("", "trainer: {allreduce: mpi}\n"), "trainer.allreduce"},
      {"bad amp", Base("", "trainer: {amp: fp8}\n"), "trainer.amp"},
      {"bad compression", Base("", "trainer: {compression: int8}\n"), "trainer.compression"},
      {"compression with the reducer", Base("", "trainer: {ddp: reducer, compression: bf16}\n"),
       "trainer.compression"},
      {"negative clip", Base("", "trainer: {clip_grad_norm: -1}\n"), "trainer.clip_grad_norm"},
      {"accumulate 1025", Base("", "trainer: {accumulate: 1025}\n"), "trainer.accumulate"},
      {"negative bucket", Base("", "trainer: {bucket_mb: -1}\n"), "trainer.bucket_mb"},
      {"huge bucket", Base("", "trainer: {bucket_mb: 2048}\n"), "trainer.bucket_mb"},
      {"negative checkpoint_every", Base("", "trainer: {checkpoint_every: -5}\n"),
       "trainer.checkpoint_every"},
      {"negative seed", Base("", "trainer: {seed: -1}\n"), "trainer.seed"},
      {"data dir with ..", Base("", "trainer: {data_dir: ../data}\n"), "trainer.data_dir"},
      {"extra_args as a string", Base("", "trainer: {extra_args: --fast}\n"), "trainer.extra_args"},
      {"extra_args of mappings", Base("", "trainer: {extra_args: [{a: b}]}\n"),
       "trainer.extra_args[0]"},
      // command
      {"command as string", "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: python3 x.py\n",
       "command"},
      {"empty command", "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: []\n", "command"},
      {"command of lists", "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: [[a]]\n", "command[0]"},
      {"empty program", "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: [\"\"]\n", "command[0]"},
      {"null argument", "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: [echo, ~]\n", "command[1]"},
      {"NUL in an argument", "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: [echo, \"a\\0b\"]\n",
       "command[1]"},
      {"argument over 64 KiB",
       "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: [echo, " + long_arg + "]\n", "command[1]"},
      // env
      {"reserved env", Base("env: {RANK: \"3\"}\n"), "env.RANK"},
      {"reserved LOCAL_RANK", Base("env: {LOCAL_RANK: 0}\n"), "env.LOCAL_RANK"},
      {"reserved MASTER_PORT", Base("env: {MASTER_PORT: 1}\n"), "env.MASTER_PORT"},
      {"reserved TORCHELASTIC_ prefix", Base("env: {TORCHELASTIC_RUN_ID: x}\n"),
       "env.TORCHELASTIC_RUN_ID"},
      {"reserved CONVOY_ prefix", Base("env: {CONVOY_JOB_ID: x}\n"), "env.CONVOY_JOB_ID"},
      {"bad env name", Base("env: {\"A-B\": x}\n"), "env.A-B"},
      {"env name starting with a digit", Base("env: {1A: x}\n"), "env.1A"},
      {"env list", Base("env: [A]\n"), "env"},
      {"env nested", Base("env: {A: [1]}\n"), "env.A"},
      {"env null value", Base("env: {A: }\n"), "env.A"},
      // the rest
      {"restarts", Base("max_restarts: 1000\n"), "max_restarts"},
      {"negative restarts", Base("max_restarts: -1\n"), "max_restarts"},
      {"negative hang", Base("hang_timeout: -5\n"), "hang_timeout"},
      {"hang over a week", Base("hang_timeout: 604801\n"), "hang_timeout"},
      {"fractional hang", Base("hang_timeout: 1.5\n"), "hang_timeout"},
      {"traversal", Base("checkpoint_dir: /var/lib/../../etc\n"), "checkpoint_dir"},
      {"trailing ..", Base("checkpoint_dir: /var/lib/..\n"), "checkpoint_dir"},
      {"relative checkpoint dir with ..", Base("checkpoint_dir: ../../etc\n"), "checkpoint_dir"},
      {"relative working dir with ..", Base("working_dir: a/../../b\n"), "working_dir"},
      {"working dir as a list", Base("working_dir: [/a]\n"), "working_dir"},
      {"resume_from with ..", Base("resume_from: ../j-000001/checkpoints\n"), "resume_from"},
      {"resume_from as a list", Base("resume_from: [j-000001]\n"), "resume_from"},
  };
  // "job.yaml: FIELD: ..." or "job.yaml:LINE:COLUMN: FIELD: ...".
  const std::regex prefix(R"(^job\.yaml:(\d+:\d+:)? ([^ ]+): )");
  for (const BadCase& c : cases) {
    auto spec = ParseJobSpec(c.text, "job.yaml");
    ASSERT_FALSE(spec.ok()) << c.what;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << c.what;
    const std::string& msg = spec.status().message();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(msg, m, prefix)) << c.what << ": " << msg;
    EXPECT_EQ(m[2].str(), c.field) << c.what << ": " << msg;
  }
}

TEST(ParseJobSpecTest, MessagesSayWhatWasWrongAndWhere) {
  auto spec = ParseJobSpec(Base("", "trainer:\n  batch_size: abc\n"), "job.yaml");
  EXPECT_EQ(spec.status().message(),
            "job.yaml:5:15: trainer.batch_size: expected an integer, got 'abc'");
  spec = ParseJobSpec(Base("env: {RANK: 1}\n"), "job.yaml");
  EXPECT_EQ(spec.status().message(),
            "job.yaml:5:13: env.RANK: set by Convoy, cannot be overridden");
  spec = ParseJobSpec("name: t\nmin_nodes: 1\nprocs_per_node: 1\ntrainer: {}\n", "job.yaml");
  EXPECT_EQ(spec.status().message(), "job.yaml: max_nodes: missing (required with min_nodes)");
  spec = ParseJobSpec("name: t\nmin_nodes: 3\nmax_nodes: 2\nprocs_per_node: 1\ntrainer: {}\n",
                      "job.yaml");
  EXPECT_EQ(spec.status().message(),
            "job.yaml:3:12: max_nodes: must be at least min_nodes (3), got 2");
  spec = ParseJobSpec(Base("", "trainer: {batch_sise: 32}\n"), "job.yaml");
  EXPECT_NE(spec.status().message().find("did you mean 'batch_size'?"), std::string::npos);
  spec = ParseJobSpec("nodes: 1\nprocs_per_node: 1\ntrainer: {}\n", "job.yaml");
  EXPECT_EQ(spec.status().message(),
            "job.yaml: name: missing (a job name: 1-63 of [A-Za-z0-9._-])");
}

TEST(ParseJobSpecTest, SyntaxErrorsGiveLineAndColumn) {
  auto spec = ParseJobSpec("name: t\nnodes: [1\n", "broken.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(std::regex_search(spec.status().message(),
                                std::regex(R"(^broken\.yaml:\d+:\d+: invalid YAML: )")))
      << spec.status().message();
  spec = ParseJobSpec("name: t\n  nodes: 1\n", "bad-indent.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message().rfind("bad-indent.yaml:2:", 0), 0u) << spec.status().message();
}

TEST(ParseJobSpecTest, JsonMustBeStrictJson) {
  // The YAML parser would accept these; as JSON they are wrong.
  for (const char* text : {"{\n  \"name\": \"j\",\n}", "{\"name\": j}", "{\"a\": 1} # c"}) {
    auto spec = ParseJobSpec(text, "job.json");
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_TRUE(std::regex_search(spec.status().message(),
                                  std::regex(R"(^job\.json:\d+:\d+: invalid JSON: )")))
        << spec.status().message();
  }
  EXPECT_EQ(ParseJobSpec("{\n  \"name\": \"j\",\n}", "job.json")
                .status()
                .message()
                .rfind("job.json:3:1: ", 0),
            0u);
}

TEST(ParseJobSpecTest, DocumentsAndSizes) {
  EXPECT_NE(ParseJobSpec(Base("") + "---\n" + Base(""), "two.yaml")
                .status()
                .message()
                .find("expected one YAML document, got 2"),
            std::string::npos);
  EXPECT_EQ(ParseJobSpec("", "empty.yaml").status().message(), "empty.yaml: the spec is empty");
  EXPECT_EQ(ParseJobSpec("# nothing\n", "c.yaml").status().message(), "c.yaml: the spec is empty");
  EXPECT_FALSE(ParseJobSpec(std::string(kMaxSpecBytes + 1, '#'), "big.yaml").ok());
  // Aliases may not expand a small file into a huge spec.
  std::string bomb = "name: t\nnodes: 1\nprocs_per_node: 1\ncommand: [&a " +
                     std::string(100 * 1024, 'x') + "]\nenv:\n";
  for (int i = 0; i < 20; ++i) bomb += "  V" + std::to_string(i) + ": *a\n";
  auto spec = ParseJobSpec(bomb, "bomb.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("expands to more than"), std::string::npos)
      << spec.status().message();
}

class SpecFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/convoy-spec-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const auto& f : files_) std::remove(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    files_.push_back(path);
    return path;
  }
  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(SpecFileTest, LoadsAFileAndNamesItInErrors) {
  auto spec = LoadJobSpecFile(Write("ok.yaml", kDemo));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->name(), "fmnist-cnn");
  const std::string bad = Write("bad.yaml", Base("colour: red\n"));
  EXPECT_EQ(LoadJobSpecFile(bad).status().message().rfind(bad + ":5:1: colour: ", 0), 0u)
      << LoadJobSpecFile(bad).status().message();
}

TEST_F(SpecFileTest, MissingUnreadableAndOversizedFiles) {
  auto missing = LoadJobSpecFile(dir_ + "/nope.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            dir_ + "/nope.yaml: cannot open the spec file: No such file or directory");
  auto directory = LoadJobSpecFile(dir_);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().message(), dir_ + ": not a regular file");
  auto big = LoadJobSpecFile(Write("big.yaml", std::string(kMaxSpecBytes + 1, '#')));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("at most 1048576 allowed"), std::string::npos)
      << big.status().message();
}

TEST(ExampleSpecsTest, ExamplesParse) {
  auto demo = LoadJobSpecFile(ExamplesDir() + "fmnist-2x1.yaml");
  ASSERT_TRUE(demo.ok()) << demo.status().message();
  EXPECT_EQ(demo->nodes(), 2);
  EXPECT_EQ(demo->procs_per_node(), 1);
  EXPECT_EQ(demo->backend(), "gloo");
  EXPECT_EQ(demo->trainer().model(), "fmnist-cnn");
  EXPECT_EQ(demo->trainer().epochs(), 1);
  EXPECT_EQ(demo->trainer().batch_size(), 32);
  EXPECT_DOUBLE_EQ(demo->trainer().lr(), 0.01);
  auto fail = LoadJobSpecFile(ExamplesDir() + "fail.yaml");
  ASSERT_TRUE(fail.ok()) << fail.status().message();
  ASSERT_EQ(fail->command_size(), 1);
  EXPECT_EQ(fail->command(0), "false");
  // Every other example is a valid spec too.
  int examples = 0;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(ExamplesDir().c_str()), &closedir);
  ASSERT_TRUE(dir);
  while (const dirent* entry = readdir(dir.get())) {
    const std::string name = entry->d_name;
    if (name.size() < 6 ||
        (name.substr(name.size() - 5) != ".yaml" && name.substr(name.size() - 5) != ".json")) {
      continue;
    }
    ++examples;
    auto spec = LoadJobSpecFile(ExamplesDir() + name);
    EXPECT_TRUE(spec.ok()) << spec.status().message();
  }
  EXPECT_GE(examples, 3);
}

// What the coordinator does on every SubmitJob: the spec may come from any client.
TEST(ValidateJobSpecTest, RpcSpecsAreCheckedToo) {
  v1::JobSpec spec;
  spec.set_name("x");
  spec.set_nodes(20000);
  spec.set_procs_per_node(1);
  spec.add_command("true");
  Status st = ValidateJobSpec(spec);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("nodes:", 0), 0u);
  spec.set_nodes(1);
  spec.set_procs_per_node(0);
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("procs_per_node:", 0), 0u);
  spec.set_procs_per_node_gpu(true);  // procs_per_node is ignored then
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.set_procs_per_node_gpu(false);
  spec.set_procs_per_node(1);
  spec.set_command(0, std::string("a\0b", 3));
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("command[0]:", 0), 0u);
  spec.set_command(0, "true");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << "an empty backend means gloo";
  spec.set_name("");
  EXPECT_EQ(ValidateJobSpec(spec).message(), "name: missing (a job name: 1-63 of [A-Za-z0-9._-])");
  spec.set_name("x");
  (*spec.mutable_env())["WORLD_SIZE"] = "9";
  EXPECT_EQ(ValidateJobSpec(spec).message(), "env.WORLD_SIZE: set by Convoy, cannot be overridden");
  spec.mutable_env()->clear();
  (*spec.mutable_env())["A"] = std::string(600 * 1024, 'a');
  (*spec.mutable_env())["B"] = std::string(600 * 1024, 'b');
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("spec:", 0), 0u);
  spec.mutable_env()->clear();
  spec.mutable_trainer()->set_lr(std::nan(""));
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("command:", 0), 0u) << "trainer and command";
  spec.clear_command();
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("trainer.lr:", 0), 0u);
  spec.mutable_trainer()->set_lr(0.1);
  spec.set_working_dir("/a/b/../c");
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("working_dir:", 0), 0u);
  spec.set_working_dir("/a/b");
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  // A client that sets a field to 0 wrote it: refused, where an unset field is the default.
  spec.mutable_trainer()->set_batch_size(0);
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("trainer.batch_size:", 0), 0u);
  spec.mutable_trainer()->clear_batch_size();
  spec.mutable_trainer()->set_epochs(0);
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("trainer.epochs:", 0), 0u);
  spec.mutable_trainer()->clear_epochs();
  spec.mutable_trainer()->set_accumulate(0);
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("trainer.accumulate:", 0), 0u);
  spec.mutable_trainer()->clear_accumulate();
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(ValidateJobSpecTest, PriorityMaxRuntimeAndCodeHashNameTheirField) {
  auto spec = ParseJobSpec(Base("priority: 5\nmax_runtime: 3600\n"), "t.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->priority(), 5);
  EXPECT_EQ(spec->max_runtime_s(), 3600);
  for (const auto& [text, field] :
       std::vector<std::pair<std::string, std::string>>{{"priority: 1001\n", "priority"},
                                                        {"priority: -1001\n", "priority"},
                                                        {"max_runtime: -1\n", "max_runtime"},
                                                        {"priority: high\n", "priority"}}) {
    auto bad = ParseJobSpec(Base(text), "t.yaml");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(field + ":"), std::string::npos)
        << bad.status().message();
  }
  v1::JobSpec rpc = *spec;
  rpc.set_code_sha256("not-a-hash");
  EXPECT_EQ(ValidateJobSpec(rpc).message().rfind("code_sha256:", 0), 0u);
  rpc.set_code_sha256(std::string(64, 'a'));
  EXPECT_TRUE(ValidateJobSpec(rpc).ok());
}

TEST(JobSpecFuzzRegressionTest, AnEnvNameWithAColonStillNamesItsField) {
  // The fuzzer's find: an env name containing ": " made "env." look like the whole field.
  auto bad = ParseJobSpec(Base("env: {\": x\": }\n"), "t.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("env.\\x3a\\x20x: "), std::string::npos)
      << bad.status().message();
  v1::JobSpec spec = *ParseJobSpec(Base(""), "t.yaml");
  (*spec.mutable_env())["a: b"] = "1";
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("env.a\\x3a\\x20b: ", 0), 0u)
      << ValidateJobSpec(spec).message();
}

TEST(ValidateJobSpecTest, ReservedEnvNames) {
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                           "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                           "TORCHELASTIC_RESTART_COUNT", "CONVOY_METRICS_SOCKET"}) {
    EXPECT_TRUE(IsReservedEnvName(name)) << name;
  }
  for (const char* name : {"OMP_NUM_THREADS", "PATH", "rank", "MY_RANK", "CONVOY"}) {
    EXPECT_FALSE(IsReservedEnvName(name)) << name;
  }
}

// Issue 12: the job's paths are relative to its own directory on the worker, and no path
// may climb out of where it points with "..".
TEST(ValidateJobSpecTest, JobPathsMayBeRelativeButNeverClimb) {
  for (const char* ok : {"ckpt", "out/ckpt", "./x", "/var/lib/convoy/jobs/j/out", "a..b/..c"}) {
    for (const char* field : {"checkpoint_dir", "working_dir"}) {
      auto spec = ParseJobSpec(Base(std::string(field) + ": " + ok + "\n"), "job.yaml");
      EXPECT_TRUE(spec.ok()) << field << " " << ok << ": " << spec.status().message();
    }
    auto spec = ParseJobSpec(Base("", std::string("trainer: {data_dir: ") + ok + "}\n"), "j");
    EXPECT_TRUE(spec.ok()) << "data_dir " << ok << ": " << spec.status().message();
  }
  auto spec = ParseJobSpec(Base("checkpoint_dir: ../../etc\n"), "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("checkpoint_dir: '../../etc' must not contain '..'"),
            std::string::npos)
      << spec.status().message();
  for (const char* bad : {"..", "../x", "x/..", "/a/../b", "a/b/../../..", "x/../"}) {
    v1::JobSpec s;
    s.set_name("x");
    s.set_nodes(1);
    s.set_procs_per_node(1);
    s.add_command("true");
    s.set_checkpoint_dir(bad);
    EXPECT_EQ(ValidateJobSpec(s).message(),
              std::string("checkpoint_dir: '") + bad + "' must not contain '..'");
    s.clear_checkpoint_dir();
    s.set_working_dir(bad);
    EXPECT_EQ(ValidateJobSpec(s).message().rfind("working_dir: '", 0), 0u) << bad;
  }
}

// Issue 32: an absent required field says "missing", where one written as 0 gets its range.
TEST(ParseJobSpecTest, AbsentRequiredFieldsSayMissing) {
  const auto message = [](const std::string& text) {
    return ParseJobSpec(text, "job.yaml").status().message();
  };
  EXPECT_EQ(message("name: t\nnodes: 1\ntrainer: {}\n"),
            "job.yaml: procs_per_node: missing (a number of processes per node, or \"gpu\")");
  EXPECT_EQ(message("name: t\nnodes: 1\nprocs_per_node: 0\ntrainer: {}\n"),
            "job.yaml:3:17: procs_per_node: must be between 1 and 256, got 0");
  EXPECT_EQ(message("name: t\nprocs_per_node: 1\ntrainer: {}\n"),
            "job.yaml: nodes: missing (a number of nodes, or min_nodes and max_nodes for an "
            "elastic job)");
  EXPECT_EQ(message("name: t\nnodes: 0\nprocs_per_node: 1\ntrainer: {}\n"),
            "job.yaml:2:8: nodes: must be between 1 and 16384, got 0");
  EXPECT_EQ(message("name: t\nmax_nodes: 2\nprocs_per_node: 1\ntrainer: {}\n"),
            "job.yaml: min_nodes: missing (required with max_nodes)");
  EXPECT_EQ(message("name: t\nmin_nodes: 0\nmax_nodes: 2\nprocs_per_node: 1\ntrainer: {}\n"),
            "job.yaml:2:12: min_nodes: must be between 1 and 16384, got 0");
  EXPECT_EQ(message("name: t\nnodes: 1\nprocs_per_node: 1\n"),
            "job.yaml: command: missing (a non-empty argv, or trainer for the built-in trainer)");
  EXPECT_EQ(message("name: t\nnodes: 1\nprocs_per_node: 1\ncommand: []\n"),
            "job.yaml:4:10: command: is empty (give a program and its arguments, as [python3, "
            "train.py])");
  EXPECT_EQ(message("name: \"\"\nnodes: 1\nprocs_per_node: 1\ntrainer: {}\n"),
            "job.yaml:1:7: name: '' is not valid: use 1-63 of [A-Za-z0-9._-], not starting with "
            "'.' or '-'");
  // The issue's case: an empty file but for the name.
  EXPECT_EQ(message("name: t\n"),
            "job.yaml: nodes: missing (a number of nodes, or min_nodes and max_nodes for an "
            "elastic job)\n"
            "job.yaml: procs_per_node: missing (a number of processes per node, or \"gpu\")\n"
            "job.yaml: command: missing (a non-empty argv, or trainer for the built-in trainer)");
  // From an RPC proto3 cannot tell 0 from absent: a zero required field is missing.
  v1::JobSpec rpc;
  rpc.set_name("t");
  rpc.set_nodes(1);
  rpc.add_command("true");
  EXPECT_EQ(ValidateJobSpec(rpc).message(),
            "procs_per_node: missing (a number of processes per node, or \"gpu\")");
}

// Issue 32: every error of a spec, one a line, in the order of the text, then the missing.
TEST(ParseJobSpecTest, AllErrorsAreReportedTogether) {
  const std::string text =
      "name: t\n"
      "nodes: 0\n"
      "trainer:\n"
      "  batch_size: abc\n"
      "  lr: -1\n"
      "max_restart: 3\n"
      "env: {RANK: 1, A: [x], B: ok}\n";
  auto spec = ParseJobSpec(text, "job.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            "job.yaml:2:8: nodes: must be between 1 and 16384, got 0\n"
            "job.yaml:4:15: trainer.batch_size: expected an integer, got 'abc'\n"
            "job.yaml:5:7: trainer.lr: must be greater than 0 and at most 1000, got -1 (omit it "
            "for the default, 0.01)\n"
            "job.yaml:6:1: max_restart: unknown field; did you mean 'max_restarts'?\n"
            "job.yaml:7:13: env.RANK: set by Convoy, cannot be overridden\n"
            "job.yaml:7:19: env.A: expected a string, got a list\n"
            "job.yaml: procs_per_node: missing (a number of processes per node, or \"gpu\")");

  // A field that cannot be read is reported once, not again by validation.
  spec = ParseJobSpec("name: t\nnodes: two\nprocs_per_node: 1\ncommand: [[a], b]\n", "job.yaml");
  EXPECT_EQ(spec.status().message(),
            "job.yaml:2:8: nodes: expected an integer, got 'two'\n"
            "job.yaml:4:11: command[0]: expected a string, got a list");
  // ... but two problems of one list are both reported.
  spec = ParseJobSpec(Base("command: [\"\", \"a\\0b\"]\n"), "job.yaml");
  EXPECT_EQ(spec.status().message(),
            "job.yaml:5:10: command: give either trainer or command, not both\n"
            "job.yaml:5:11: command[0]: the program must not be empty\n"
            "job.yaml:5:15: command[1]: contains a NUL byte");
  spec = ParseJobSpec("name: t\nnodes: 1\nprocs_per_node: 1\ntrainer: fmnist\n", "job.yaml");
  EXPECT_EQ(spec.status().message(), "job.yaml:4:10: trainer: expected a mapping, got 'fmnist'");

  // One error, one line: a newline in a key or a quoted value is written as \x0a.
  spec = ParseJobSpec(Base("\"nodes\\n\": 1\nbackend: \"a\\nb\"\n"), "job.yaml");
  EXPECT_EQ(spec.status().message(),
            "job.yaml:5:1: nodes\\x0a: unknown field; did you mean 'nodes'?\n"
            "job.yaml:6:10: backend: must be one of auto, gloo, nccl, got 'a\\x0ab'");

  // What stops the reading comes alone.
  spec = ParseJobSpec("name: t\nnodes: [1\nprocs_per_node: x\n", "job.yaml");
  EXPECT_EQ(spec.status().message().find('\n'), std::string::npos) << spec.status().message();
  spec = ParseJobSpec("- a\n- b\n", "job.yaml");
  EXPECT_EQ(spec.status().message(), "job.yaml: spec: expected a mapping, got a list");

  // The coordinator's check: every problem of an RPC's spec, one a line.
  v1::JobSpec rpc;
  rpc.set_name("no spaces");
  rpc.set_nodes(1);
  rpc.set_procs_per_node(300);
  rpc.mutable_trainer()->set_lr(0);
  rpc.set_max_restarts(-1);
  EXPECT_EQ(ValidateJobSpec(rpc).message(),
            "name: 'no spaces' is not valid: use 1-63 of [A-Za-z0-9._-], not starting with '.' "
            "or '-'\n"
            "procs_per_node: must be between 1 and 256, got 300\n"
            "trainer.lr: must be greater than 0 and at most 1000, got 0 (omit it for the default, "
            "0.01)\n"
            "max_restarts: must be between 0 and 100, got -1");

  // Many problems: the message stays small enough for gRPC trailers, and says how many more.
  std::string many = Base("env:\n");
  for (int i = 0; i < 2000; ++i) many += "  " + std::to_string(1000 + i) + "X: v\n";
  spec = ParseJobSpec(many, "job.yaml");
  const std::string& m = spec.status().message();
  EXPECT_LE(m.size(), kMaxSpecMessageBytes + 100);
  EXPECT_EQ(m.rfind("job.yaml:6:10: env.1000X: is not a valid environment variable name\n", 0), 0u)
      << m.substr(0, 200);
  EXPECT_TRUE(std::regex_search(m, std::regex("\njob\\.yaml: spec: \\d+ more problems not shown$")))
      << m.substr(m.size() - 200);
}

// Issue 32: `convoy submit --set PATH=VALUE` sets any field as the file would.
TEST(ParseJobSpecTest, SetOverridesAnyFieldAsTheFileWould) {
  auto spec = ParseJobSpec(kDemo, "demo.yaml",
                           {"trainer.max_steps=300", "name=quick", "env.FOO=bar", "trainer.lr=0.1",
                            "nodes=1", "procs_per_node=gpu", "trainer.epochs=2", "trainer.epochs=5",
                            "node_selector.topology.kubernetes.io/zone=a"});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->trainer().max_steps(), 300);
  EXPECT_EQ(spec->name(), "quick");
  EXPECT_EQ(spec->env().at("FOO"), "bar");
  EXPECT_EQ(spec->env().at("OMP_NUM_THREADS"), "1") << "the file's other variables stay";
  EXPECT_DOUBLE_EQ(spec->trainer().lr(), 0.1);
  EXPECT_EQ(spec->trainer().epochs(), 5) << "the last --set wins";
  EXPECT_EQ(spec->trainer().batch_size(), 32) << "the file's other trainer fields stay";
  EXPECT_EQ(spec->nodes(), 1);
  EXPECT_TRUE(spec->procs_per_node_gpu());
  EXPECT_EQ(spec->node_selector().at("topology.kubernetes.io/zone"), "a");
  // A value is YAML: a flow list, a mapping, or null when empty.
  spec = ParseJobSpec(kDemo, "demo.yaml", {"trainer=", "command=[python3, train.py]"});
  EXPECT_EQ(spec.status().message(),
            "--set command=[python3, train.py]: command: give either trainer or command, not both");
  spec = ParseJobSpec(Base(""), "job.yaml", {"trainer={epochs: 2, lr: 0.5}"});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->trainer().epochs(), 2);
  EXPECT_FALSE(spec->trainer().has_batch_size()) << "a mapping replaces the whole trainer";

  // Mappings are made where there are none: `trainer:` alone, or no trainer at all.
  spec = ParseJobSpec(Base("", "trainer:\n"), "job.yaml", {"trainer.max_steps=7"});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->trainer().max_steps(), 7);
  spec = ParseJobSpec("name: t\nnodes: 1\ncommand: [x]\n", "job.yaml",
                      {"procs_per_node=2", "env.A=1", "node_selector.zone=b"});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->procs_per_node(), 2) << "a --set may give a field the file lacks";
  EXPECT_EQ(spec->env().at("A"), "1");

  // JSON specs too.
  spec = ParseJobSpec(R"({"name": "j", "nodes": 2, "procs_per_node": 1, "trainer": {"epochs": 1}})",
                      "job.json", {"trainer.epochs=3", "nodes=1"});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->trainer().epochs(), 3);
  EXPECT_EQ(spec->nodes(), 1);

  // Typed and checked as in the file; an error in a --set names the --set.
  const std::pair<std::string, std::string> bad[] = {
      {"trainer.max_step=300",
       "--set trainer.max_step=300: trainer.max_step: unknown field; did you mean 'max_steps'?"},
      {"nodes=two", "--set nodes=two: nodes: expected an integer, got 'two'"},
      {"nodes=\"2\"", "--set nodes=\"2\": nodes: expected an integer, got the string '2'"},
      {"trainer.lr=0",
       "--set trainer.lr=0: trainer.lr: must be greater than 0 and at most 1000, got 0 (omit it "
       "for the default, 0.01)"},
      {"trainer={lr: x}", "--set trainer={lr: x}: trainer.lr: expected a number, got 'x'"},
      {"env.RANK=1", "--set env.RANK=1: env.RANK: set by Convoy, cannot be overridden"},
      {"env.A.B=1", "--set env.A.B=1: env.A.B: is not a valid environment variable name"},
      {"colour=red",
       "--set colour=red: colour: unknown field (known: after, backend, checkpoint, "
       "checkpoint_dir, "
       "command, cpus_per_proc, env, gpus_per_proc, hang_steps, hang_timeout, max_nodes, "
       "max_restarts, max_runtime, memory_per_proc, min_nodes, name, node_selector, "
       "nodes, on_straggler, preemptible, priority, procs_per_node, resize_interval, "
       "resume_checkpoint, resume_from, straggler_factor, straggler_steps, sweep, trainer, "
       "working_dir)"},
      {"max_steps", "--set max_steps: expected FIELD=VALUE, as trainer.max_steps=300"},
      {"=3", "--set =3: expected FIELD=VALUE, as trainer.max_steps=300"},
      {"trainer..lr=1",
       "--set trainer..lr=1: 'trainer..lr' is not a field (FIELD or FIELD.FIELD, as "
       "trainer.max_steps)"},
      {"name.first=x", "--set name.first=x: name: expected a mapping, got 't'"},
      {"command=[a", "--set command=[a: command: invalid YAML: end of sequence flow not found"},
      {"name={a: b}", "--set name={a: b}: name: expected a string, got a mapping"},
      {"name=a\nb: c", "--set name=a\\x0ab: c: name: invalid YAML: illegal map value"},
  };
  for (const auto& [set, want] : bad) {
    auto refused = ParseJobSpec(Base(""), "job.yaml", {set});
    ASSERT_FALSE(refused.ok()) << set;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message(), want) << set;
  }
  // The file's own errors keep their place; those of --set come after them.
  auto both = ParseJobSpec(Base("max_restarts: -1\n"), "job.yaml", {"trainer.epochs=0"});
  EXPECT_EQ(both.status().message(),
            "job.yaml:5:15: max_restarts: must be between 0 and 100, got -1\n"
            "--set trainer.epochs=0: trainer.epochs: must be between 1 and 10000, got 0");
  // A --set may mend the file.
  EXPECT_TRUE(ParseJobSpec(Base("max_restarts: -1\n"), "job.yaml", {"max_restarts=2"}).ok());
}

// The spec of `convoy submit -- CMD`, with --set applied as to a file.
TEST(OverrideJobSpecTest, ASpecWithoutAFileTakesSetsToo) {
  v1::JobSpec base;
  base.set_name("job");
  base.set_nodes(1);
  base.set_procs_per_node(1);
  base.add_command("python3");
  base.add_command("train.py");
  base.set_code_sha256(std::string(64, 'a'));
  auto spec =
      OverrideJobSpec(base, {"nodes=2", "env.OMP_NUM_THREADS=4", "max_restarts=3"}, "submit");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->nodes(), 2);
  EXPECT_EQ(spec->env().at("OMP_NUM_THREADS"), "4");
  EXPECT_EQ(spec->max_restarts(), 3);
  EXPECT_EQ(spec->command_size(), 2);
  EXPECT_EQ(spec->code_sha256(), base.code_sha256());
  auto refused = OverrideJobSpec(base, {"trainer.epochs=1"}, "submit");
  EXPECT_EQ(refused.status().message(),
            "submit: command: give either trainer or command, not both");
  refused = OverrideJobSpec(base, {"trainer.epoch=1"}, "submit");
  EXPECT_EQ(refused.status().message(),
            "submit: command: give either trainer or command, not both\n"
            "--set trainer.epoch=1: trainer.epoch: unknown field; did you mean 'epochs'?");

  // Without --set a spec comes back as it was, every field of the text form included.
  auto full =
      ParseJobSpec(Base("backend: nccl\nenv: {A: \"1\"}\nmax_restarts: 2\n"
                        "checkpoint_dir: ck\nhang_timeout: 9\nworking_dir: w\npriority: -3\n"
                        "max_runtime: 60\npreemptible: false\ngpus_per_proc: 1\n"
                        "cpus_per_proc: 2\nmemory_per_proc: 1Gi\n"
                        "node_selector: {zone: a}\n",
                        "trainer: {model: mlp, epochs: 2, max_steps: 9, batch_size: 8, "
                        "lr: 0.123456789012345678, momentum: 0.5, optimizer: adam, "
                        "lr_schedule: cosine, clip_grad_norm: 1.5, accumulate: 2, "
                        "bucket_mb: 0.5, checkpoint_every: 4, data_dir: d, seed: 0, "
                        "ddp: hooks, allreduce: shm, amp: bf16, snapshot_every: 0, "
                        "compression: powersgd, powersgd_rank: 4, powersgd_start_step: 10, "
                        "max_bad_steps: 5, extra_args: [--x, \"1\"]}\n"),
                   "job.yaml");
  ASSERT_TRUE(full.ok()) << full.status().message();
  auto same = OverrideJobSpec(*full, {}, "submit");
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(same->SerializeAsString(), full->SerializeAsString());
  // The sample sets every TrainerSpec field: the reader and the writer follow the message by
  // reflection (issue 44), and a field added to it is round-tripped here once it is set above.
  std::vector<const google::protobuf::FieldDescriptor*> set;
  full->trainer().GetReflection()->ListFields(full->trainer(), &set);
  EXPECT_EQ(static_cast<int>(set.size()), v1::TrainerSpec::descriptor()->field_count());
  v1::JobSpec elastic = base;
  elastic.clear_nodes();
  elastic.set_min_nodes(1);
  elastic.set_max_nodes(3);
  elastic.set_resize_interval_s(30);
  elastic.set_procs_per_node_gpu(true);
  elastic.clear_procs_per_node();
  same = OverrideJobSpec(elastic, {}, "submit");
  ASSERT_TRUE(same.ok()) << same.status().message();
  elastic.set_backend("gloo");
  EXPECT_EQ(same->SerializeAsString(), elastic.SerializeAsString());
}

// Issue 32: "lr: -1" said ">= 0" while 0 was refused too. Each range's message states the
// range its check accepts: both ends are accepted, and just past either end is refused with
// that message.
TEST(ParseJobSpecTest, RangeMessagesMatchTheRule) {
  struct Range {
    std::string field;
    std::string lowest, highest;  // accepted
    std::string below, above;     // refused ("": no such value)
    std::string rule;             // the message, before ", got <value>"
  };
  const Range ranges[] = {
      {"nodes", "1", "16384", "0", "16385", "must be between 1 and 16384"},
      {"procs_per_node", "1", "256", "0", "257", "must be between 1 and 256"},
      {"max_restarts", "0", "100", "-1", "101", "must be between 0 and 100"},
      {"hang_timeout", "0", "604800", "-1", "604801", "must be between 0 and 604800"},
      {"priority", "-1000", "1000", "-1001", "1001", "must be between -1000 and 1000"},
      {"max_runtime", "0", "31536000", "-1", "31536001", "must be between 0 and 31536000"},
      {"gpus_per_proc", "0", "64", "-1", "65", "must be between 0 and 64"},
      {"cpus_per_proc", "0", "4096", "-1", "4097", "must be between 0 and 4096"},
      {"memory_per_proc", "0", "1125899906842624", "", "1125899906842625",
       "must be between 0 and 1125899906842624"},
      {"trainer.epochs", "1", "10000", "0", "10001", "must be between 1 and 10000"},
      {"trainer.max_steps", "0", "1099511627776", "-1", "1099511627777",
       "must be between 0 and 1099511627776"},
      {"trainer.batch_size", "1", "65536", "0", "65537", "must be between 1 and 65536"},
      {"trainer.accumulate", "1", "1024", "0", "1025", "must be between 1 and 1024"},
      {"trainer.checkpoint_every", "0", "1099511627776", "-1", "1099511627777",
       "must be between 0 and 1099511627776"},
      {"trainer.snapshot_every", "0", "1099511627776", "-1", "1099511627777",
       "must be between 0 and 1099511627776"},
      {"trainer.powersgd_rank", "1", "64", "0", "65", "must be between 1 and 64"},
      {"trainer.powersgd_start_step", "0", "1099511627776", "-1", "1099511627777",
       "must be between 0 and 1099511627776"},
      {"trainer.max_bad_steps", "1", "1000000", "0", "1000001", "must be between 1 and 1000000"},
      {"trainer.lr", "1e-09", "1000", "0", "1000.5", "must be greater than 0 and at most 1000"},
      {"trainer.lr", "1e-09", "1000", "-1", "", "must be greater than 0 and at most 1000"},
      {"trainer.momentum", "0", "0.999999", "-0.5", "0.9999999", "must be between 0 and 0.999999"},
      {"trainer.bucket_mb", "0.001", "1024", "0.0005", "1024.5", "must be between 0.001 and 1024"},
      {"trainer.bucket_mb", "0.001", "1024", "0", "", "must be between 0.001 and 1024"},
      {"trainer.clip_grad_norm", "0", "1000000000", "-1", "10000000000",
       "must be between 0 and 1000000000"},
      {"trainer.seed", "0", "1099511627776", "-1", "2199023255552",
       "must be between 0 and 1099511627776"},
  };
  for (const Range& r : ranges) {
    for (const std::string& ok : {r.lowest, r.highest}) {
      auto spec = ParseJobSpec(Base(""), "job.yaml", {r.field + "=" + ok});
      EXPECT_TRUE(spec.ok()) << r.field << "=" << ok << ": " << spec.status().message();
    }
    for (const std::string& out : {r.below, r.above}) {
      if (out.empty()) continue;
      const std::string set = r.field + "=" + out;
      auto spec = ParseJobSpec(Base(""), "job.yaml", {set});
      ASSERT_FALSE(spec.ok()) << set;
      const std::string& m = spec.status().message();
      // "--set F=V: F: <rule>[ (note)], got V[ (note)]"
      const std::string head = "--set " + set + ": " + r.field + ": " + r.rule;
      EXPECT_EQ(m.rfind(head, 0), 0u) << set << ": " << m;
      EXPECT_NE(m.find(", got " + out), std::string::npos) << set << ": " << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << set << ": " << m;
    }
  }
}

}  // namespace job_spec_test
}  // namespace convoy

// Regressions found by the fuzzer (tests/fuzz/job_spec_fuzz.cc).
namespace convoy {
namespace job_spec_test {

// YAML passes bytes that are not UTF-8 through; protobuf refuses to decode such a string
// field, so the spec must be refused here, naming the field, not fail at the coordinator.
TEST(JobSpecFuzzRegressionTest, StringsMustBeUtf8) {
  const std::string spec =
      "name: t\nnodes: 1\nprocs_per_node: 1\ncommand:\n  - sh\n  - -c\n  - 'echo\xb6 hi'\n";
  auto parsed = ParseJobSpec(spec, "job.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "job.yaml:7:5: command[2]: is not valid UTF-8");

  v1::JobSpec s;
  s.set_name("t");
  s.set_nodes(1);
  s.set_procs_per_node(1);
  s.add_command("true");
  (*s.mutable_env())["A"] = "caf\xc3\xa9 \xf0\x9f\x98\x80";  // well-formed: accepted
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s).message();
  for (const std::string bad : {"\xff", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    (*s.mutable_env())["A"] = bad;
    EXPECT_EQ(ValidateJobSpec(s).message(), "env.A: is not valid UTF-8");
  }
  s.mutable_env()->clear();
  s.set_working_dir("/srv/\xfe");
  EXPECT_EQ(ValidateJobSpec(s).message(), "working_dir: is not valid UTF-8");
}

// yaml-cpp 0.7's LoadAll looped forever, allocating, on a ',' outside any flow collection.
TEST(JobSpecFuzzRegressionTest, StrayCommaIsAnErrorNotAHang) {
  for (const std::string text : {",", ",\n", "# comment\n,name: t\nnodes: 1\n", "\n, "}) {
    auto parsed = ParseJobSpec(text, "job.yaml");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("invalid YAML: unexpected ','"), std::string::npos)
        << parsed.status().message();
  }
  auto two = ParseJobSpec("name: t\n---\n,\n", "job.yaml");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("job.yaml:"), std::string::npos);
  EXPECT_EQ(ParseJobSpec("---\n---\n---\n", "d.yaml").status().message(),
            "d.yaml: expected one YAML document, got 3");
}

// yaml-cpp quotes the character it cannot escape, a newline or a control byte as is: the
// message must stay one line (the fuzzer's find once errors became one a line).
TEST(JobSpecFuzzRegressionTest, ASyntaxErrorStaysOneLine) {
  for (const std::string bad : {"\\\x01", "\\\x1b", "\\\x7f"}) {
    auto parsed = ParseJobSpec("name: \"a" + bad + "\"\n", "job.yaml");
    ASSERT_FALSE(parsed.ok());
    const std::string& m = parsed.status().message();
    EXPECT_EQ(m.rfind("job.yaml:1:", 0), 0u) << m;
    EXPECT_NE(m.find("invalid YAML: "), std::string::npos) << m;
    EXPECT_TRUE(std::none_of(m.begin(), m.end(), [](char c) {
      return (c >= 0 && c < 0x20) || c == 0x7f;
    })) << m;
  }
}

// An empty key named no field ("job.yaml:2:1: : unknown field"); long names and values were
// quoted whole in messages (a coordinator returns them in gRPC trailers, 8 KiB by default).
TEST(JobSpecFuzzRegressionTest, MessagesNameAFieldAndQuoteLittle) {
  auto parsed =
      ParseJobSpec("name: t\n\"\": 1\nnodes: 1\nprocs_per_node: 1\ntrainer:\n", "job.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "job.yaml:2:1: spec: a key is empty");
  parsed = ParseJobSpec(Base("") + "env: {\"\": x}\n", "job.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find(" env: a variable has an empty name"), std::string::npos)
      << parsed.status().message();
  // An empty name with no value named "env." (found by the fuzzer in CI); the same for labels.
  parsed = ParseJobSpec(Base("") + "env: {\"\": }\n", "job.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "job.yaml:5:6: env: a variable has an empty name");
  parsed = ParseJobSpec(Base("") + "node_selector: {\"\": }\n", "job.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "job.yaml:5:16: node_selector: a name is empty");

  const std::string huge(100 * 1024, 'x');
  for (const std::string& text :
       {Base(huge + ": 1\n"), Base("env: {" + huge + ": 1}\n"), Base("backend: " + huge + "\n"),
        "name: " + huge + "\nnodes: 1\nprocs_per_node: 1\ncommand: [a]\n",
        Base("max_restarts: 1" + std::string(5000, '0') + "\n"),
        Base("", "trainer: {model: " + huge + "}\n")}) {
    parsed = ParseJobSpec(text, "job.yaml");
    ASSERT_FALSE(parsed.ok());
    EXPECT_LT(parsed.status().message().size(), 1024u) << parsed.status().message().substr(0, 200);
  }
  v1::JobSpec s;
  s.set_name(huge);
  EXPECT_LT(ValidateJobSpec(s).message().size(), 1024u);
  s.set_name("t");
  s.set_nodes(1);
  s.set_procs_per_node(1);
  s.add_command("true");
  (*s.mutable_env())[huge] = "1";
  EXPECT_EQ(ValidateJobSpec(s).message().rfind("env.xxx", 0), 0u);
  EXPECT_LT(ValidateJobSpec(s).message().size(), 1024u);
  s.mutable_env()->clear();
  (*s.mutable_env())[""] = "1";
  EXPECT_EQ(ValidateJobSpec(s).message(), "env: a variable has an empty name");
  s.mutable_env()->clear();
  (*s.mutable_node_selector())[""] = "a";
  EXPECT_EQ(ValidateJobSpec(s).message(), "node_selector: a label has an empty name");
}

// What the trainer is given of its TrainerSpec (spec/trainer_spec_env.h): each field set, by
// reflection, as text that reads back exactly, under the flag of its name.
TEST(TrainerSpecValuesTest, EachFieldSetAsTextThatReadsBackExactly) {
  v1::TrainerSpec t;
  t.set_lr(0.1);
  t.set_seed(0);       // optional: written, so set
  t.set_max_steps(0);  // not optional: 0 is unset
  t.set_model("mlp");
  t.add_extra_args("--threads");  // a list: argv's, not a value
  const auto values = TrainerSpecValues(t);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[0], (std::pair<std::string, std::string>{"model", "mlp"}));
  EXPECT_EQ(values[1].first, "lr");
  EXPECT_EQ(std::strtod(values[1].second.c_str(), nullptr), 0.1);
  EXPECT_EQ(values[2], (std::pair<std::string, std::string>{"seed", "0"}));
  EXPECT_EQ(TrainerFlagName("powersgd_start_step"), "--powersgd-start-step");
}

}  // namespace job_spec_test
}  // namespace convoy

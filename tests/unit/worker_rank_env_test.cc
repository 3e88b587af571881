// The environment of a rank: the exact variables of a 2 nodes x 2 processes launch.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "spec/trainer_spec_env.h"
#include "tests/support/temp_dir.h"
#include "worker/exec/rank_env.h"

namespace convoy {
namespace worker_rank_env_test {

v1::Launch TwoByTwo(int group_rank) {
  v1::Launch launch;
  launch.set_job_id("j-000007");
  launch.set_attempt(2);
  launch.set_group_rank(group_rank);
  launch.set_num_nodes(2);
  launch.set_local_world_size(2);
  launch.set_world_size(4);
  launch.add_ranks(group_rank * 2);
  launch.add_ranks(group_rank * 2 + 1);
  launch.set_master_addr("10.0.0.1");
  launch.set_master_port(41000);
  launch.set_restart_count(2);
  launch.set_max_restarts(3);
  launch.set_run_id("j-000007");
  (*launch.mutable_spec()->mutable_env())["FOO"] = "bar";
  return launch;
}

TEST(BuildRankEnvTest, ExactVariablesOfEveryRankOfTwoNodesByTwo) {
  const std::map<std::string, std::string> base{{"PATH", "/usr/bin"}, {"RANK", "stale"}};
  for (int node = 0; node < 2; ++node) {
    for (int local = 0; local < 2; ++local) {
      const std::string rank = std::to_string(node * 2 + local);
      RankFiles files;
      files.metrics_socket = "/run/x.sock";
      files.checkpoint_dir = "/ckpt";
      const auto env = BuildRankEnv(base, TwoByTwo(node), local, 8, files);
      const std::map<std::string, std::string> expected{
          {"PATH", "/usr/bin"},  // the worker's own environment
          {"FOO", "bar"},        // the spec's
          {"RANK", rank},
          {"LOCAL_RANK", std::to_string(local)},
          {"WORLD_SIZE", "4"},
          {"LOCAL_WORLD_SIZE", "2"},
          {"GROUP_RANK", std::to_string(node)},
          {"GROUP_WORLD_SIZE", "2"},
          {"ROLE_RANK", rank},
          {"ROLE_WORLD_SIZE", "4"},
          {"ROLE_NAME", "default"},
          {"MASTER_ADDR", "10.0.0.1"},
          {"MASTER_PORT", "41000"},
          {"TORCHELASTIC_RESTART_COUNT", "2"},
          {"TORCHELASTIC_MAX_RESTARTS", "3"},
          {"TORCHELASTIC_RUN_ID", "j-000007"},
          {"CONVOY_JOB_ID", "j-000007"},
          {"CONVOY_ATTEMPT", "2"},
          {"CONVOY_MAX_WORLD_SIZE", "4"},  // not elastic: the world itself
          {"CONVOY_METRICS_SOCKET", "/run/x.sock"},
          {"CONVOY_CHECKPOINT_DIR", "/ckpt"},
          {"OMP_NUM_THREADS", "4"},  // 8 cores / 2 local ranks
          {"PYTHONUNBUFFERED", "1"}};
      EXPECT_EQ(env, expected) << "node " << node << " local rank " << local;
    }
  }
}

TEST(BuildRankEnvTest, IdentityOfTheJobAndClusterWhenTheLaunchHasThem) {
  v1::Launch launch = TwoByTwo(0);
  auto env = BuildRankEnv({}, launch, 0, 8, {});
  EXPECT_EQ(env.count("CONVOY_JOB_UID"), 0u);  // an older coordinator's launch: left unset
  EXPECT_EQ(env.count("CONVOY_CLUSTER_ID"), 0u);
  launch.set_job_uid("0123456789abcdef0123456789abcdef");
  launch.set_cluster_id("fedcba9876543210fedcba9876543210");
  (*launch.mutable_spec()->mutable_env())["CONVOY_JOB_UID"] = "forged";
  env = BuildRankEnv({}, launch, 0, 8, {});
  EXPECT_EQ(env.at("CONVOY_JOB_UID"), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(env.at("CONVOY_CLUSTER_ID"), "fedcba9876543210fedcba9876543210");
}

TEST(BuildRankEnvTest, OmpThreadsDefaultsYieldToTheUserAndTheWorker) {
  v1::Launch launch = TwoByTwo(0);
  EXPECT_EQ(BuildRankEnv({}, launch, 0, 1, {}).at("OMP_NUM_THREADS"), "1");  // never 0
  EXPECT_EQ(BuildRankEnv({{"OMP_NUM_THREADS", "3"}}, launch, 0, 8, {}).at("OMP_NUM_THREADS"), "3");
  (*launch.mutable_spec()->mutable_env())["OMP_NUM_THREADS"] = "1";
  EXPECT_EQ(BuildRankEnv({{"OMP_NUM_THREADS", "3"}}, launch, 0, 8, {}).at("OMP_NUM_THREADS"), "1");
}

TEST(BuildRankEnvTest, EachRankSeesOnlyItsOwnGpusAndCores) {
  v1::Launch launch = TwoByTwo(0);
  v1::RankResources* r0 = launch.add_resources();
  r0->add_gpus(2);
  r0->add_gpus(3);
  r0->set_cpus(6);
  v1::RankResources* r1 = launch.add_resources();
  r1->add_gpus(0);
  r1->add_gpus(1);
  r1->set_cpus(6);
  // The worker's own CUDA_VISIBLE_DEVICES and OMP_NUM_THREADS give way to the plan's.
  const std::map<std::string, std::string> base{{"CUDA_VISIBLE_DEVICES", "0,1,2,3"},
                                                {"OMP_NUM_THREADS", "1"}};
  auto env0 = BuildRankEnv(base, launch, 0, 16, {});
  auto env1 = BuildRankEnv(base, launch, 1, 16, {});
  EXPECT_EQ(env0.at("CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(env1.at("CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(env0.at("OMP_NUM_THREADS"), "6");
  // Nothing asked: the worker's variables stay as they were.
  v1::Launch plain = TwoByTwo(0);
  auto env = BuildRankEnv(base, plain, 0, 16, {});
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "0,1,2,3");
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "1");
}

TEST(BuildRankEnvTest, ElasticWorldAndTheSnapshotAndPreemptPaths) {
  v1::Launch launch = TwoByTwo(0);
  launch.set_max_world_size(6);  // max_nodes 3 x 2
  RankFiles files;
  files.snapshot_dir = "/dev/shm/convoy-w1/j-000007";
  files.preempt_file = "/w/jobs/j-000007/attempt-2/preempt";
  auto env = BuildRankEnv({}, launch, 0, 8, files);
  EXPECT_EQ(env.at("CONVOY_MAX_WORLD_SIZE"), "6");
  EXPECT_EQ(env.at("WORLD_SIZE"), "4");
  EXPECT_EQ(env.at("CONVOY_SNAPSHOT_DIR"), files.snapshot_dir);
  EXPECT_EQ(env.at("CONVOY_PREEMPT_FILE"), files.preempt_file);
}

TEST(BuildRankEnvTest, ConvoyVariablesWinOverTheSpec) {
  v1::Launch launch = TwoByTwo(1);
  (*launch.mutable_spec()->mutable_env())["RANK"] = "99";
  (*launch.mutable_spec()->mutable_env())["CONVOY_JOB_ID"] = "other";
  const auto env = BuildRankEnv({}, launch, 1, 8, {});
  EXPECT_EQ(env.at("RANK"), "3");
  EXPECT_EQ(env.at("CONVOY_JOB_ID"), "j-000007");
}

// A trainer job's ranks get its TrainerSpec, with the data directory the worker checked and
// resolved, and without extra_args (they are on argv); a command job's get none.
TEST(BuildRankEnvTest, TrainerJobsGetTheirTrainerSpecWithTheResolvedDataDir) {
  v1::Launch launch = TwoByTwo(0);
  EXPECT_EQ(BuildRankEnv({}, launch, 0, 8, {}).count(kTrainerSpecEnv), 0u);
  v1::TrainerSpec* t = launch.mutable_spec()->mutable_trainer();
  t->set_lr(0.05);
  t->set_seed(0);
  t->set_data_dir("data");
  t->add_extra_args("--threads=1");
  RankFiles files;
  files.data_dir = "/srv/job-root/j-000007-u1/data";
  const auto env = BuildRankEnv({}, launch, 1, 8, files);
  auto sent = DecodeTrainerSpec(env.at(kTrainerSpecEnv));
  ASSERT_TRUE(sent.ok()) << sent.status().message();
  EXPECT_EQ(sent->lr(), 0.05);
  EXPECT_TRUE(sent->has_seed());
  EXPECT_EQ(sent->data_dir(), files.data_dir);
  EXPECT_EQ(sent->extra_args_size(), 0);
}

}  // namespace worker_rank_env_test
}  // namespace convoy

namespace convoy {
namespace worker_rank_env_test {

TEST(TorchErrorFileTest, RecordJsonGivesTypeMessageAndTraceback) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "e.json").string();
  std::ofstream(path) << R"({"message": {"message": "ValueError: lr 7.5 is too large",
      "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  in main\n",
      "timestamp": "1"}}})";
  v1::ProcessExit exit;
  ASSERT_TRUE(ReadTorchErrorFile(path, &exit));
  EXPECT_EQ(exit.error_type(), "ValueError");
  EXPECT_EQ(exit.error_message(), "lr 7.5 is too large");
  EXPECT_EQ(exit.error_traceback(), "Traceback (most recent call last):\n  in main\n");

  std::ofstream(path) << R"({"message": "a plain message: with a colon"})";
  v1::ProcessExit plain;
  ASSERT_TRUE(ReadTorchErrorFile(path, &plain));
  EXPECT_EQ(plain.error_type(), "");
  EXPECT_EQ(plain.error_message(), "a plain message: with a colon");

  std::ofstream(path, std::ios::trunc);  // what the worker made, not written by the rank
  v1::ProcessExit none;
  EXPECT_FALSE(ReadTorchErrorFile(path, &none));
  EXPECT_FALSE(ReadTorchErrorFile(path + ".missing", &none));
  std::ofstream(path) << "{not json";
  EXPECT_FALSE(ReadTorchErrorFile(path, &none));
  EXPECT_EQ(none.error_message(), "");
}

TEST(TorchErrorFileTest, SetInTheRankEnvironment) {
  v1::Launch launch;
  launch.set_local_world_size(1);
  launch.add_ranks(0);
  RankFiles files;
  files.error_file = "/w/attempt-0/rank-0.error.json";
  auto env = BuildRankEnv({}, launch, 0, 1, files);
  EXPECT_EQ(env.at("TORCHELASTIC_ERROR_FILE"), "/w/attempt-0/rank-0.error.json");
}

TEST(AllowedWorkerEnvironmentTest, KeepsTheDocumentedSetAndDropsTheRest) {
  const std::map<std::string, std::string> worker{{"PATH", "/usr/bin"},
                                                  {"LANG", "C.UTF-8"},
                                                  {"LC_ALL", "C"},
                                                  {"HOME", "/root"},
                                                  {"CUDA_VISIBLE_DEVICES", "0"},
                                                  {"NCCL_SOCKET_IFNAME", "eth0"},
                                                  {"LD_LIBRARY_PATH", "/opt/l"},
                                                  {"OMP_PROC_BIND", "true"},
                                                  {"CONVOY_JOIN_TOKEN", "secret"},
                                                  {"AWS_SECRET_ACCESS_KEY", "k"},
                                                  {"MY_SITE_VAR", "1"},
                                                  {"MY_SITE_OTHER", "2"},
                                                  {"PATHX", "not PATH"},
                                                  {"CUDA", "not CUDA_*"}};
  const auto env = AllowedWorkerEnvironment(worker);
  const std::map<std::string, std::string> expected{{"PATH", "/usr/bin"},
                                                    {"LANG", "C.UTF-8"},
                                                    {"LC_ALL", "C"},
                                                    {"HOME", "/root"},
                                                    {"CUDA_VISIBLE_DEVICES", "0"},
                                                    {"NCCL_SOCKET_IFNAME", "eth0"},
                                                    {"LD_LIBRARY_PATH", "/opt/l"},
                                                    {"OMP_PROC_BIND", "true"}};
  EXPECT_EQ(env, expected);
  // --pass-env adds exact names and prefixes.
  const auto more = AllowedWorkerEnvironment(worker, {"MY_SITE_*", "AWS_SECRET_ACCESS_KEY"});
  EXPECT_EQ(more.count("MY_SITE_VAR"), 1u);
  EXPECT_EQ(more.count("MY_SITE_OTHER"), 1u);
  EXPECT_EQ(more.count("AWS_SECRET_ACCESS_KEY"), 1u);
  EXPECT_EQ(more.count("CONVOY_JOIN_TOKEN"), 0u);
}

TEST(WithMallocHugePagesTest, AddsTheTunableAndKeepsTheOperators) {
  EXPECT_EQ(WithMallocHugePages({{"PATH", "/usr/bin"}}),
            (std::map<std::string, std::string>{{"PATH", "/usr/bin"},
                                                {"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}));
  // The worker's own tunables (--pass-env GLIBC_TUNABLES) stay, this one after them.
  EXPECT_EQ(
      WithMallocHugePages({{"GLIBC_TUNABLES", "glibc.malloc.arena_max=2"}}).at("GLIBC_TUNABLES"),
      "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
  // An operator who set it (0, or 2 for hugetlbfs pages) keeps their choice.
  EXPECT_EQ(
      WithMallocHugePages({{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=0"}}).at("GLIBC_TUNABLES"),
      "glibc.malloc.hugetlb=0");
}

}  // namespace worker_rank_env_test
}  // namespace convoy

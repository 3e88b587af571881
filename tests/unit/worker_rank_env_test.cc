// The environment of a rank: the exact variables of a 2 nodes x 2 processes launch.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "worker/rank_env.h"

namespace convoy {
namespace {

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
      const auto env = BuildRankEnv(base, TwoByTwo(node), local, 8, "/run/x.sock", "/ckpt");
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
          {"CONVOY_METRICS_SOCKET", "/run/x.sock"},
          {"CONVOY_CHECKPOINT_DIR", "/ckpt"},
          {"OMP_NUM_THREADS", "4"},  // 8 cores / 2 local ranks
          {"PYTHONUNBUFFERED", "1"}};
      EXPECT_EQ(env, expected) << "node " << node << " local rank " << local;
    }
  }
}

TEST(BuildRankEnvTest, OmpThreadsDefaultsYieldToTheUserAndTheWorker) {
  v1::Launch launch = TwoByTwo(0);
  EXPECT_EQ(BuildRankEnv({}, launch, 0, 1, "", "").at("OMP_NUM_THREADS"), "1");  // never 0
  EXPECT_EQ(BuildRankEnv({{"OMP_NUM_THREADS", "3"}}, launch, 0, 8, "", "").at("OMP_NUM_THREADS"),
            "3");
  (*launch.mutable_spec()->mutable_env())["OMP_NUM_THREADS"] = "1";
  EXPECT_EQ(BuildRankEnv({{"OMP_NUM_THREADS", "3"}}, launch, 0, 8, "", "").at("OMP_NUM_THREADS"),
            "1");
}

TEST(BuildRankEnvTest, ConvoyVariablesWinOverTheSpec) {
  v1::Launch launch = TwoByTwo(1);
  (*launch.mutable_spec()->mutable_env())["RANK"] = "99";
  (*launch.mutable_spec()->mutable_env())["CONVOY_JOB_ID"] = "other";
  const auto env = BuildRankEnv({}, launch, 1, 8, "", "");
  EXPECT_EQ(env.at("RANK"), "3");
  EXPECT_EQ(env.at("CONVOY_JOB_ID"), "j-000007");
}

}  // namespace
}  // namespace convoy

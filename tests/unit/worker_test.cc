// Worker logic without processes: metric-line parsing and the environment of a rank.
#include <gtest/gtest.h>

#include "worker/metrics_parse.h"
#include "worker/supervisor.h"

namespace convoy {
namespace {

TEST(ParseMetricLineTest, WellKnownFieldsAndValues) {
  auto rec = ParseMetricLine(
      R"({"kind":"step","step":12,"epoch":1,"loss":0.25,"samples":384,"seconds":1.5,)"
      R"("samples_per_s":256.0,"note":"text","nested":{"a":1}})");
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_EQ(rec->kind(), "step");
  EXPECT_EQ(rec->step(), 12);
  EXPECT_TRUE(rec->has_step());
  EXPECT_EQ(rec->epoch(), 1);
  EXPECT_DOUBLE_EQ(rec->loss(), 0.25);
  EXPECT_TRUE(rec->has_loss());
  EXPECT_EQ(rec->samples(), 384);
  EXPECT_DOUBLE_EQ(rec->values().at("samples_per_s"), 256.0);
  EXPECT_EQ(rec->values().count("note"), 0u);  // only numbers are kept
  EXPECT_EQ(rec->values().count("nested"), 0u);
}

TEST(ParseMetricLineTest, GarbageIsRefusedNotFatal) {
  for (const std::string& bad :
       std::vector<std::string>{"", "not json", "{\"step\": 1", "[1,2,3]", "42", "\"text\"",
                                std::string(kMaxMetricLineBytes + 1, ' ')}) {
    EXPECT_FALSE(ParseMetricLine(bad).ok()) << bad.substr(0, 20);
  }
  auto minimal = ParseMetricLine("{}");
  ASSERT_TRUE(minimal.ok());
  EXPECT_FALSE(minimal->has_step());
}

TEST(BuildRankEnvTest, TorchrunCompatibleEnvironment) {
  v1::Launch launch;
  launch.set_job_id("j-000007");
  launch.set_attempt(2);
  launch.set_group_rank(1);
  launch.set_num_nodes(2);
  launch.set_local_world_size(2);
  launch.set_world_size(4);
  launch.set_master_addr("10.0.0.1");
  launch.set_master_port(41000);
  launch.set_restart_count(2);
  launch.set_max_restarts(3);
  launch.set_run_id("j-000007");
  (*launch.mutable_spec()->mutable_env())["FOO"] = "bar";
  const std::map<std::string, std::string> base{{"PATH", "/usr/bin"}, {"RANK", "stale"}};
  auto env = BuildRankEnv(base, launch, 1, 8, "/run/x.sock", "/ckpt");
  const std::map<std::string, std::string> expected{{"RANK", "3"},
                                                    {"LOCAL_RANK", "1"},
                                                    {"WORLD_SIZE", "4"},
                                                    {"LOCAL_WORLD_SIZE", "2"},
                                                    {"GROUP_RANK", "1"},
                                                    {"ROLE_RANK", "3"},
                                                    {"ROLE_WORLD_SIZE", "4"},
                                                    {"MASTER_ADDR", "10.0.0.1"},
                                                    {"MASTER_PORT", "41000"},
                                                    {"TORCHELASTIC_RESTART_COUNT", "2"},
                                                    {"TORCHELASTIC_MAX_RESTARTS", "3"},
                                                    {"TORCHELASTIC_RUN_ID", "j-000007"},
                                                    {"CONVOY_JOB_ID", "j-000007"},
                                                    {"CONVOY_ATTEMPT", "2"},
                                                    {"CONVOY_METRICS_SOCKET", "/run/x.sock"},
                                                    {"CONVOY_CHECKPOINT_DIR", "/ckpt"},
                                                    {"OMP_NUM_THREADS", "4"},
                                                    {"FOO", "bar"},
                                                    {"PATH", "/usr/bin"}};
  for (const auto& [k, v] : expected) EXPECT_EQ(env[k], v) << k;
  // A user's OMP_NUM_THREADS wins over the default.
  (*launch.mutable_spec()->mutable_env())["OMP_NUM_THREADS"] = "1";
  EXPECT_EQ(BuildRankEnv(base, launch, 0, 8, "", "")["OMP_NUM_THREADS"], "1");
}

}  // namespace
}  // namespace convoy

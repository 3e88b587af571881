// The rank contract is written once (common/rank_contract.h); examples/python/convoy_metrics.py,
// which users copy into their projects, spells the same names: every constant of the Python
// module must be the header's, and the header's metric keys and socket variable must be there.
#include "common/rank_contract.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

namespace convoy::rank_contract {
namespace common_rank_contract_test {

// NAME = "value" at the start of a line of `path`.
std::map<std::string, std::string> PythonConstants(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, std::string> out;
  const std::regex assignment(R"(^([A-Z][A-Z0-9_]*)\s*=\s*"([^"]*)\"\s*(#.*)?$)");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, m, assignment)) out[m[1]] = m[2];
  }
  return out;
}

TEST(RankContract, ThePythonMetricsModuleSpellsTheHeadersNames) {
  const auto py =
      PythonConstants(std::string(CONVOY_SOURCE_DIR) + "/examples/python/convoy_metrics.py");
  const std::map<std::string, std::string> want = {
      {"METRICS_SOCKET_ENV", kMetricsSocketEnv},
      {"KIND", metric::kKind},
      {"STEP", metric::kStep},
      {"EPOCH", metric::kEpoch},
      {"LOSS", metric::kLoss},
      {"SAMPLES", metric::kSamples},
      {"SECONDS", metric::kSeconds},
      {"SAMPLES_PER_S", metric::kSamplesPerS},
      {"TOTAL_STEPS", metric::kTotalSteps},
      {"FIRST_STEP_S", metric::kFirstStepS},
      {"TEST_ACCURACY", metric::kTestAccuracy},
      {"TEST_LOSS", metric::kTestLoss},
      {"CHECKPOINT_DIR_ENV", kCheckpointDirEnv},
      {"KIND_CHECKPOINT", metric::kKindCheckpoint},
      {"CHECKPOINT_PATH", metric::kCheckpointPath},
  };
  for (const auto& [name, value] : want) {
    auto it = py.find(name);
    ASSERT_NE(it, py.end()) << "convoy_metrics.py has no " << name << " (\"" << value << "\")";
    EXPECT_EQ(it->second, value) << name;
  }
  for (const auto& [name, value] : py) {
    EXPECT_EQ(want.count(name), 1u) << "convoy_metrics.py's " << name << " = \"" << value
                                    << "\" is not in common/rank_contract.h's table here";
  }
}

TEST(RankContract, CheckpointNames) {
  EXPECT_TRUE(IsCheckpointName("ckpt-000000000100.pt"));
  EXPECT_TRUE(IsCheckpointName("ckpt-.pt"));
  EXPECT_FALSE(IsCheckpointName("ckpt-000000000100.pt.tmp"));
  EXPECT_FALSE(IsCheckpointName("ckpt-1.ptx"));
  EXPECT_FALSE(IsCheckpointName("model-1.pt"));
  EXPECT_FALSE(IsCheckpointName("ckpt.pt"));
  EXPECT_FALSE(IsCheckpointName(""));
}

TEST(RankContract, EveryVariableIsConvoysOwn) {
  for (const char* name : {kJobIdEnv, kAttemptEnv, kJobUidEnv, kClusterIdEnv, kMaxWorldSizeEnv,
                           kMetricsSocketEnv, kCheckpointDirEnv, kSnapshotDirEnv, kPreemptFileEnv,
                           kResumeFromEnv, kResumeFromUidEnv, kCacheDirEnv, kCheckpointPolicyEnv}) {
    EXPECT_EQ(std::string(name).rfind("CONVOY_", 0), 0u) << name;
  }
}

}  // namespace common_rank_contract_test
}  // namespace convoy::rank_contract

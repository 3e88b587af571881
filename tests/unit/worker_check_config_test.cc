// What convoy-worker --check-config decides without starting (worker/daemon/check_config.h,
// worker/daemon/flags.h): the CA fingerprint's form, a job root apart from the worker's own
// directories and reachable by the ranks, every problem reported at once.
#include "worker/daemon/check_config.h"
#include "worker/files/job_root.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/config_file.h"
#include "tests/support/temp_dir.h"
#include "worker/daemon/flags.h"

namespace convoy {
namespace worker_check_config_test {

TEST(CheckCaFingerprint, AcceptsWhatInitPrints) {
  const std::string hex(64, 'a');
  EXPECT_TRUE(CheckCaFingerprint("--ca-fingerprint", "SHA256:" + hex).ok());
  EXPECT_TRUE(CheckCaFingerprint("--ca-fingerprint", "sha256:" + std::string(64, 'F')).ok());
  std::string colons = "SHA256:";
  for (int i = 0; i < 32; ++i) colons += std::string(i ? ":" : "") + "0B";
  EXPECT_TRUE(CheckCaFingerprint("--ca-fingerprint", colons).ok());
  for (const std::string& bad : {std::string("SHA256:abcd"), hex, "SHA256:" + hex + "a",
                                 "SHA256:" + std::string(64, 'g'), "MD5:" + hex, std::string()}) {
    const Status s = CheckCaFingerprint("--ca-fingerprint", bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.message().rfind("--ca-fingerprint: '" + bad + "'", 0), 0u) << s.message();
  }
  EXPECT_NE(CheckCaFingerprint("--f", "SHA256:abcd").message().find("got 4 digits"),
            std::string::npos);
}

class JobRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.str().c_str(), 0711);
    work_ = dir_.str() + "/work";
    std::filesystem::create_directories(work_ + "/jobs");
  }
  Status Check(const std::string& root, std::optional<RunAsUser> user = std::nullopt) {
    return CheckJobRootForRanks(root, work_, user);
  }
  testing::TempDir dir_;
  std::string work_;
};

TEST_F(JobRootTest, ApartFromTheWorkersOwnDirectories) {
  EXPECT_TRUE(Check(dir_.str() + "/jobs").ok());
  EXPECT_TRUE(Check(work_ + "/job-root").ok()) << "in the work dir, apart from its own dirs";
  for (const std::string& root : {work_, dir_.str(), std::string("/")}) {
    const Status s = Check(root);
    EXPECT_FALSE(s.ok()) << root;
    EXPECT_NE(s.message().find("holds the worker's own directory"), std::string::npos)
        << s.message();
  }
  for (const std::string& root :
       {work_ + "/jobs", work_ + "/jobs/x", work_ + "/run", work_ + "/tls/y", work_ + "/code"}) {
    const Status s = Check(root);
    EXPECT_FALSE(s.ok()) << root;
    EXPECT_NE(s.message().find("the worker's own directory"), std::string::npos) << s.message();
  }
  // Through a symlink too.
  std::filesystem::create_directory_symlink(work_, dir_.str() + "/link");
  EXPECT_FALSE(Check(dir_.str() + "/link/jobs").ok());
}

TEST_F(JobRootTest, ReachableByTheRanksUser) {
  const std::string locked = dir_.str() + "/state";
  mkdir(locked.c_str(), 0700);
  chmod(locked.c_str(), 0700);
  RunAsUser other;
  other.uid = 4321;
  other.gid = 4321;
  other.name = "someone";
  const Status s = Check(locked + "/jobs", other);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--job-root " + locked +
                             "/jobs: the ranks (user someone, uid 4321) "
                             "cannot reach it: " +
                             locked + " (owner"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(Check(locked + "/jobs").ok()) << "this process's own user owns it";
  chmod(locked.c_str(), 0711);
  EXPECT_TRUE(Check(locked + "/jobs", other).ok());
}

// Runs ParseWorkerFlags with --check-config and then CheckWorkerConfig, as main does.
std::vector<std::string> CheckAll(std::vector<std::string> args) {
  args.insert(args.begin(), "convoy-worker");
  args.push_back("--check-config");
  args.push_back("--run-as");  // a user every Debian has (a root test process needs one)
  args.push_back("nobody");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  WorkerFlags flags;
  int exit_code = -1;
  ConfigCheck check;
  const Status parsed =
      ParseWorkerFlags(static_cast<int>(argv.size()), argv.data(), &flags, &exit_code, &check);
  EXPECT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(exit_code, 0);
  EXPECT_TRUE(check.enabled);
  std::vector<std::string> notes;
  if (!check.incomplete) CheckWorkerConfig(flags, &notes, &check.errors);
  return check.errors;
}

TEST(CheckWorkerConfigTest, ReportsEveryProblem) {
  testing::TempDir dir;
  chmod(dir.str().c_str(), 0711);
  const std::string work = dir.str() + "/work";
  const auto errors =
      CheckAll({"--coordinator", "127.0.0.1:7070", "--name", "w1", "--work-dir", work, "--job-root",
                work + "/jobs", "--ca-fingerprint", "SHA256:abcd", "--metrics-listen",
                "127.0.0.1:99999", "--trainer", "/bin/true"});
  ASSERT_EQ(errors.size(), 4u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0].rfind("--metrics-listen", 0), 0u) << errors[0];
  EXPECT_EQ(errors[1].rfind("--ca-fingerprint: 'SHA256:abcd'", 0), 0u) << errors[1];
  EXPECT_EQ(errors[2].rfind("--job-root " + work + "/jobs: is the worker's own directory", 0), 0u)
      << errors[2];
  EXPECT_EQ(errors[3].rfind("no credentials", 0), 0u) << errors[3];
  EXPECT_FALSE(std::filesystem::exists(work)) << "--check-config creates nothing";
}

// A snapshot directory the ranks cannot reach would leave their snapshots silently off.
TEST(CheckWorkerConfigTest, ASnapshotDirectoryTheRanksCannotReachIsRefused) {
  testing::TempDir dir;
  chmod(dir.str().c_str(), 0711);
  const std::string locked = dir.str() + "/locked";
  mkdir(locked.c_str(), 0700);
  chmod(locked.c_str(), 0700);
  std::vector<std::string> args = {"--coordinator",    "127.0.0.1:7070",
                                   "--name",           "w1",
                                   "--work-dir",       dir.str() + "/work",
                                   "--job-root",       dir.str() + "/jobs",
                                   "--join-token",     "t",
                                   "--ca-fingerprint", "SHA256:" + std::string(64, 'c'),
                                   "--trainer",        "/bin/true",
                                   "--snapshot-dir",   locked + "/shm"};
  auto errors = CheckAll(args);
  if (geteuid() != 0) GTEST_SKIP() << "ranks run as another user only under root";
  ASSERT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0].rfind("--snapshot-dir " + locked + "/shm: the ranks (user nobody", 0), 0u)
      << errors[0];
  EXPECT_NE(errors[0].find(locked + " (owner 0, mode 0700) is not searchable"), std::string::npos)
      << errors[0];
  chmod(locked.c_str(), 0711);
  errors = CheckAll(args);
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
}

TEST(CheckWorkerConfigTest, AJoinTokenIsCredentials) {
  testing::TempDir dir;
  chmod(dir.str().c_str(), 0711);
  const auto errors =
      CheckAll({"--coordinator", "127.0.0.1:7070", "--name", "w1", "--work-dir",
                dir.str() + "/work", "--job-root", dir.str() + "/jobs", "--join-token", "t",
                "--ca-fingerprint", "SHA256:" + std::string(64, 'c'), "--trainer", "/bin/true"});
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
}

}  // namespace worker_check_config_test
}  // namespace convoy

// A rank's log file (rotation, two rotated files kept) and its stderr tail; where an
// attempt's metrics socket lives.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "worker/exec/metrics_server.h"
#include "worker/files/rank_log.h"

namespace convoy {
namespace worker_rank_log_test {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class RankLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("convoy-ranklog-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(RankLogTest, KeepsBothStreamsInOrderAndTheLastStderrLines) {
  RankLog log((dir_ / "rank-0.log").string(), 1 << 20);
  ASSERT_TRUE(log.ok());
  log.Append("out1\n", 5, false);
  log.Append("err", 3, true);
  log.Append("1\nerr2\n", 7, true);
  for (int i = 3; i <= 25; ++i) {
    const std::string line = "err" + std::to_string(i) + "\n";
    log.Append(line.data(), line.size(), true);
  }
  log.Append("partial", 7, true);
  log.Close();
  const auto tail = log.StderrTail();
  ASSERT_EQ(tail.size(), RankLog::kTailLines);
  EXPECT_EQ(tail.front(), "err7");
  EXPECT_EQ(tail.back(), "partial");
  const std::string text = ReadFile(dir_ / "rank-0.log");
  EXPECT_EQ(text.rfind("out1\nerr1\nerr2\nerr3\n", 0), 0u);
  EXPECT_EQ(text.substr(text.size() - 13), "err25\npartial");
}

TEST_F(RankLogTest, RotatesAtTheLimitKeepingTwoOldFiles) {
  const auto path = dir_ / "rank-1.log";
  RankLog log(path.string(), 10);
  for (char c : std::string("abcd")) {
    const std::string chunk(6, c);
    log.Append(chunk.data(), chunk.size(), false);
  }
  log.Close();
  EXPECT_EQ(ReadFile(path), "dddddd");
  EXPECT_EQ(ReadFile(path.string() + ".1"), "cccccc");
  EXPECT_EQ(ReadFile(path.string() + ".2"), "bbbbbb");
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".3"));
}

TEST_F(RankLogTest, RotatedFilesBelongToTheRunAsUserAndNoSymlinkIsFollowed) {
  if (geteuid() != 0) GTEST_SKIP() << "giving files away needs root";
  const auto path = dir_ / "rank-2.log";
  {
    RankLog log(path.string(), 10, 4321, 4322);
    for (char c : std::string("abc")) {
      const std::string chunk(6, c);
      log.Append(chunk.data(), chunk.size(), false);
    }
    log.Close();
  }
  for (const std::string& p : {path.string(), path.string() + ".1", path.string() + ".2"}) {
    struct stat st {};
    ASSERT_EQ(stat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, 4321u) << p;
    EXPECT_EQ(st.st_gid, 4322u) << p;
  }
  // A log path that is a symlink (planted by whoever may write the directory) is not opened.
  const auto target = dir_ / "victim";
  std::ofstream(target) << "keep";
  std::filesystem::create_symlink(target, dir_ / "rank-3.log");
  RankLog log((dir_ / "rank-3.log").string(), 1 << 20, 4321, 4322);
  EXPECT_FALSE(log.ok());
  log.Append("x", 1, false);
  EXPECT_EQ(ReadFile(target), "keep");
  struct stat st {};
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
}

TEST_F(RankLogTest, AppendsToAnExistingFileAndSurvivesAnUnwritableOne) {
  const auto path = dir_ / "rank-2.log";
  { std::ofstream(path) << "before\n"; }
  {
    RankLog log(path.string(), 1 << 20);
    log.Append("after\n", 6, false);
  }
  EXPECT_EQ(ReadFile(path), "before\nafter\n");
  RankLog broken((dir_ / "missing-dir/rank-3.log").string(), 1 << 20);
  EXPECT_FALSE(broken.ok());
  broken.Append("x\n", 2, true);  // no crash; the tail still works
  broken.Note("cannot start");
  EXPECT_EQ(broken.StderrTail(), (std::vector<std::string>{"x", "cannot start"}));
}

TEST(MetricsSocketPathTest, InTheWorkDirOrAPrivateFallback) {
  EXPECT_EQ(MetricsSocketPath("/var/lib/convoy", "", "job-1", 2),
            "/var/lib/convoy/run/job-1.2.sock");
  const std::string deep = "/tmp/" + std::string(150, 'd');
  EXPECT_EQ(MetricsSocketPath(deep, "", "job-1", 2), "") << "too long, and no fallback yet";
  // The fallback directory has an unpredictable name (mkdtemp) and is nobody else's.
  auto dir = MakeSocketFallbackDir(/*searchable=*/false);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  auto other = MakeSocketFallbackDir(/*searchable=*/true);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*dir, *other);
  EXPECT_EQ(dir->rfind("/tmp/convoy-", 0), 0u) << *dir;
  struct stat st {};
  ASSERT_EQ(lstat(dir->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  ASSERT_EQ(lstat(other->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);  // ranks of another user reach their socket only
  const std::string fallback = MetricsSocketPath(deep, *dir, "job-1", 2);
  EXPECT_EQ(fallback.rfind(*dir + "/", 0), 0u) << fallback;
  EXPECT_LT(fallback.size(), sizeof(sockaddr_un::sun_path));
  EXPECT_NE(fallback, MetricsSocketPath(deep, *dir, "job-1", 3));
  rmdir(dir->c_str());
  rmdir(other->c_str());
}

}  // namespace worker_rank_log_test
}  // namespace convoy

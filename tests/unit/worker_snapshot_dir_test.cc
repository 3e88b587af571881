// The jobs' snapshot directories on a worker (worker/files/snapshot_dir.h): made private to the
// ranks' user, never through a symlink, removed when the job finishes or idles.
#include "worker/files/snapshot_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <filesystem>
#include <fstream>

namespace convoy {
namespace worker_snapshot_dir_test {

namespace fs = std::filesystem;

class SnapshotDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy-snap-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

mode_t Mode(const fs::path& p) {
  struct stat sb {};
  EXPECT_EQ(lstat(p.c_str(), &sb), 0) << p;
  return sb.st_mode & 07777;
}

TEST_F(SnapshotDirTest, MadePrivateAndRemovedWithWhatIsInIt) {
  const std::string root = (dir_ / "shm").string();
  auto made = PrepareSnapshotDir(root, "j-000001", std::nullopt);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(*made, root + "/j-000001");
  EXPECT_EQ(Mode(root), 0711u);
  EXPECT_EQ(Mode(*made), 0700u);
  std::ofstream(*made + "/snap-000000000100.pt") << "state";
  // Again (a later attempt): the same directory, its contents kept.
  ASSERT_TRUE(PrepareSnapshotDir(root, "j-000001", std::nullopt).ok());
  EXPECT_TRUE(fs::exists(*made + "/snap-000000000100.pt"));
  EXPECT_TRUE(RemoveSnapshotDir(root, "j-000001").ok());
  EXPECT_FALSE(fs::exists(*made));
  EXPECT_TRUE(RemoveSnapshotDir(root, "j-000001").ok());  // missing is fine
  EXPECT_FALSE(PrepareSnapshotDir(root, "../etc", std::nullopt).ok());
}

// By cluster id and job uid when the launch has them (job ids repeat across clusters); by
// job id from an older coordinator. Such directories are made, removed and expired alike.
TEST_F(SnapshotDirTest, KeyedByClusterAndJobUid) {
  const std::string kCluster = "fedcba9876543210fedcba9876543210";
  const std::string kUid = "0123456789abcdef0123456789abcdef";
  EXPECT_EQ(SnapshotKey("j-000001", kCluster, kUid), kCluster + "-" + kUid);
  EXPECT_EQ(SnapshotKey("j-000001", "", kUid), "j-000001");
  EXPECT_EQ(SnapshotKey("j-000001", kCluster, ""), "j-000001");
  EXPECT_EQ(SnapshotKey("j-000001", kCluster, "../../etc"), "j-000001");
  const std::string root = (dir_ / "shm").string();
  auto made = PrepareSnapshotDir(root, SnapshotKey("j-000001", kCluster, kUid), std::nullopt);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(*made, root + "/" + kCluster + "-" + kUid);
  EXPECT_EQ(Mode(*made), 0700u);
  const utimbuf t{time(nullptr) - 7200, time(nullptr) - 7200};
  ASSERT_EQ(utime(made->c_str(), &t), 0);
  EXPECT_EQ(ExpireSnapshotDirs(root, kSnapshotIdleMs, {}),
            std::set<std::string>{kCluster + "-" + kUid});
  EXPECT_FALSE(fs::exists(*made));
  EXPECT_FALSE(PrepareSnapshotDir(root, kCluster + "/" + kUid, std::nullopt).ok());
}

TEST_F(SnapshotDirTest, ASymlinkIsNeverFollowed) {
  fs::create_directories(dir_ / "elsewhere");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "shm");
  EXPECT_FALSE(PrepareSnapshotDir((dir_ / "shm").string(), "j-1", std::nullopt).ok());
  fs::remove(dir_ / "shm");
  const std::string root = (dir_ / "shm").string();
  ASSERT_TRUE(fs::create_directories(root));
  fs::create_directory_symlink(dir_ / "elsewhere", root + "/j-2");
  EXPECT_FALSE(PrepareSnapshotDir(root, "j-2", std::nullopt).ok());
  std::ofstream((dir_ / "elsewhere" / "keep").string()) << "x";
  EXPECT_TRUE(RemoveSnapshotDir(root, "j-2").ok());
  EXPECT_TRUE(fs::exists(dir_ / "elsewhere" / "keep"));  // the link went, not its target
}

TEST_F(SnapshotDirTest, IdleJobsExpireButNotThoseKept) {
  const std::string root = (dir_ / "shm").string();
  for (const char* job : {"old", "kept", "fresh"}) {
    auto d = PrepareSnapshotDir(root, job, std::nullopt);
    ASSERT_TRUE(d.ok());
    std::ofstream(*d + "/snap") << "x";
  }
  const time_t two_hours_ago = time(nullptr) - 7200;
  for (const char* job : {"old", "kept"}) {
    const utimbuf t{two_hours_ago, two_hours_ago};
    ASSERT_EQ(utime((root + "/" + job + "/snap").c_str(), &t), 0);
    ASSERT_EQ(utime((root + "/" + job).c_str(), &t), 0);
  }
  EXPECT_EQ(ExpireSnapshotDirs(root, kSnapshotIdleMs, {"kept"}), std::set<std::string>{"old"});
  EXPECT_FALSE(fs::exists(root + "/old"));
  EXPECT_TRUE(fs::exists(root + "/kept"));
  EXPECT_TRUE(fs::exists(root + "/fresh"));
}

TEST(SnapshotRootTest, SharedMemoryWhenThereIsSome) {
  const std::string root = DefaultSnapshotRoot("w1", "/var/lib/convoy-worker");
  if (access("/dev/shm", W_OK | X_OK) == 0) {
    EXPECT_EQ(root, "/dev/shm/convoy-w1");
  } else {
    EXPECT_EQ(root, "/var/lib/convoy-worker/snapshots");
  }
}

}  // namespace worker_snapshot_dir_test
}  // namespace convoy

// The ranks' data cache directory: private to the user the ranks run as.
#include "worker/data_cache_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace convoy {
namespace {

struct stat Lstat(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st;
}

TEST(DataCacheDirTest, OnePrivateDirectoryPerUser) {
  testing::TempDir work("data-cache-dir");
  auto dir = PrepareDataCacheDir(work.str(), std::nullopt);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  EXPECT_EQ(*dir, work / ("data-cache/" + std::to_string(geteuid())));
  EXPECT_EQ(Lstat(work / "data-cache").st_mode & 07777, 0711u);
  struct stat st = Lstat(*dir);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  // Loosened modes are tightened again at the next start.
  ASSERT_EQ(chmod(dir->c_str(), 0777), 0);
  ASSERT_TRUE(PrepareDataCacheDir(work.str(), std::nullopt).ok());
  EXPECT_EQ(Lstat(*dir).st_mode & 07777, 0700u);

  if (geteuid() == 0) {  // a run-as user gets its own, owned by it
    RunAsUser nobody{65534, 65534, "nobody", "/"};
    auto other = PrepareDataCacheDir(work.str(), nobody);
    ASSERT_TRUE(other.ok()) << other.status().message();
    EXPECT_EQ(*other, work / "data-cache/65534");
    EXPECT_EQ(Lstat(*other).st_uid, 65534u);
    EXPECT_EQ(Lstat(*other).st_mode & 07777, 0700u);
    EXPECT_NE(*other, *dir);
  }
}

// A worker killed with -9 never sees its ranks' exits: what they were writing into the cache
// is removed at its next start, when the writer is gone; a live writer's file stays, and so
// do the entries.
TEST(DataCacheDirTest, TemporariesOfDeadWritersGoAtStart) {
  testing::TempDir work("data-cache-dir");
  auto dir = PrepareDataCacheDir(work.str(), std::nullopt);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // now a pid that no process has
  const std::string dead = std::to_string(child);
  const std::string alive = std::to_string(getpid());
  for (const std::string& name :
       {"train.gz.abc.tmp." + dead, "train.gz.abc.meta.tmp." + dead, "test.gz.abc.tmp." + alive,
        std::string("train.gz.abc"), std::string("train.gz.abc.meta"), std::string("x.tmp.y")}) {
    std::ofstream(*dir + "/" + name) << "bytes";
  }
  EXPECT_EQ(RemoveDeadWritersCacheTemporaries(work.str()), 2);
  EXPECT_FALSE(std::filesystem::exists(*dir + "/train.gz.abc.tmp." + dead));
  EXPECT_FALSE(std::filesystem::exists(*dir + "/train.gz.abc.meta.tmp." + dead));
  EXPECT_TRUE(std::filesystem::exists(*dir + "/test.gz.abc.tmp." + alive)) << "a live writer's";
  EXPECT_TRUE(std::filesystem::exists(*dir + "/train.gz.abc"));
  EXPECT_TRUE(std::filesystem::exists(*dir + "/train.gz.abc.meta"));
  EXPECT_TRUE(std::filesystem::exists(*dir + "/x.tmp.y"));
  EXPECT_EQ(RemoveDeadWritersCacheTemporaries(work.str() + "/nowhere"), 0);
}

TEST(DataCacheDirTest, SymlinksAreRefused) {
  testing::TempDir work("data-cache-dir");
  testing::TempDir elsewhere("data-cache-elsewhere");
  std::filesystem::create_directory_symlink(elsewhere.path(), work / "data-cache");
  EXPECT_FALSE(PrepareDataCacheDir(work.str(), std::nullopt).ok());
  std::filesystem::remove(work / "data-cache");
  std::filesystem::create_directory(work / "data-cache");
  std::filesystem::create_directory_symlink(elsewhere.path(),
                                            work / ("data-cache/" + std::to_string(geteuid())));
  EXPECT_FALSE(PrepareDataCacheDir(work.str(), std::nullopt).ok());
}

// The filler is the daemon's: destroying it (the worker stopping) kills a fill still running
// and waits for its thread, so that nothing of it outlives the worker (the in-process test
// worker included) or writes into a work dir that is being removed.
TEST(DataCacheFillerTest, DestroyingItKillsAFillStillRunning) {
  testing::TempDir work("data-cache-filler");
  const std::string trainer = work / "fake-trainer";
  const std::string pid_file = work / "filler.pid";
  {
    std::ofstream out(trainer);
    out << "#!/bin/sh\necho $$ > " << pid_file << ".tmp\nmv " << pid_file << ".tmp " << pid_file
        << "\nexec sleep 60\n";
  }
  chmod(trainer.c_str(), 0755);
  auto filler =
      DataCacheFiller::Start(trainer, work / "cache", std::nullopt, {{"PATH", "/usr/bin:/bin"}});
  ASSERT_NE(filler, nullptr);
  pid_t pid = 0;
  for (int i = 0; i < 500 && pid == 0; ++i) {
    std::ifstream in(pid_file);
    if (!(in >> pid)) {
      pid = 0;
      usleep(10'000);
    }
  }
  ASSERT_GT(pid, 0) << "the fake trainer never started";
  ASSERT_EQ(kill(pid, 0), 0);
  filler.reset();
  // Killed and reaped by the filler's thread before the destructor returned.
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(DataCacheFillerTest, NothingStartsWithoutATrainer) {
  testing::TempDir work("data-cache-filler");
  EXPECT_EQ(DataCacheFiller::Start(work / "no-trainer", work / "cache", std::nullopt, {}), nullptr);
}

}  // namespace
}  // namespace convoy

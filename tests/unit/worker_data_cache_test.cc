// The worker's data cache (worker/files/data_cache.h): one directory the worker owns, the per-user
// caches of earlier versions removed; a data set under a root is filled once on the cache's
// thread and again only when its source changes; a job's own data is cached by its bytes' hash.
#include "worker/files/data_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/data_cache.h"
#include "common/rank_contract.h"
#include "tests/support/temp_dir.h"

namespace convoy {
namespace worker_data_cache_test {

namespace fs = std::filesystem;

void WriteGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
}

class WorkerDataCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = tmp_.str() + "/work";
    root_ = tmp_.str() + "/datasets";
    data_ = root_ + "/fmnist";
    fs::create_directories(work_);
    fs::create_directories(data_);
    for (const std::string& f : rank_contract::DataFiles(data_)) WriteGz(f, "bytes of " + f);
  }
  testing::TempDir tmp_;
  std::string work_, root_, data_;
};

TEST_F(WorkerDataCacheTest, FillsADataSetOnceAndAgainOnlyWhenItsSourceChanges) {
  auto cache = WorkerDataCache::Open(work_, {root_});
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  WorkerDataCache& c = **cache;
  EXPECT_EQ(c.dir(), work_ + "/data-cache/shared");
  struct stat st {};
  ASSERT_EQ(lstat(c.dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u);
  EXPECT_EQ(st.st_uid, geteuid());

  EXPECT_EQ(c.Ensure(data_), 4);
  c.WaitIdle();
  EXPECT_EQ(c.counts().filled, 4);
  for (const std::string& f : rank_contract::DataFiles(data_)) {
    CachedFile read = LoadGzCached(f, c.dir());
    EXPECT_EQ(read.note, "cache hit") << f;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(read.bytes->data()), read.bytes->size()),
              "bytes of " + f);
  }
  EXPECT_EQ(c.Ensure(data_), 0) << "a current data set is not filled again";

  const std::string changed = rank_contract::DataFile(data_, "t10k", "labels");
  WriteGz(changed, "new labels");
  EXPECT_EQ(c.Ensure(data_), 1);
  c.WaitIdle();
  EXPECT_EQ(c.counts().filled, 5);
  EXPECT_EQ(LoadGzCached(changed, c.dir()).note, "cache hit");
}

// A job's own data (shipped in its code, say) is cached by the SHA-256 of its bytes: the same
// data shipped by two jobs is decompressed once, and a rank started after Ensure waits for
// the fill instead of decompressing its own copy. Only the job's own files are read.
TEST_F(WorkerDataCacheTest, AJobsOwnDataIsCachedByItsBytesOnceForEveryJob) {
  if (!ContentEntries()) GTEST_SKIP() << "built without SHA-256";
  const std::string one = tmp_.str() + "/job-root/j-1", two = tmp_.str() + "/job-root/j-2";
  std::string big(4 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  for (const std::string& dir : {one, two}) {
    fs::create_directories(dir);
    for (const std::string& f : rank_contract::DataFiles(dir)) {
      WriteGz(f, big + fs::path(f).filename().string());
    }
  }
  auto cache = WorkerDataCache::Open(work_, {root_});
  ASSERT_TRUE(cache.ok());
  WorkerDataCache& c = **cache;
  EXPECT_EQ(c.Ensure(one), 4);
  // Started after Ensure, before or after the fill ends: never a copy of its own.
  for (const std::string& f : rank_contract::DataFiles(one)) {
    CachedFile read = LoadGzCached(f, c.dir());
    EXPECT_EQ(read.note.rfind("cache hit (by content", 0), 0u) << read.note;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(read.bytes->data()), read.bytes->size()),
              big + fs::path(f).filename().string());
  }
  c.WaitIdle();
  EXPECT_EQ(c.counts().filled, 4);
  for (const std::string& f : rank_contract::DataFiles(two)) {
    EXPECT_EQ(LoadGzCached(f, c.dir()).note, "cache hit (by content)") << f;
  }
  EXPECT_EQ(c.Ensure(two), 4);
  c.WaitIdle();
  EXPECT_EQ(c.counts().filled, 8);
  // A restart: its files unchanged since their fill, nothing is read again; a file written
  // since is.
  EXPECT_EQ(c.Ensure(two), 0);
  const std::string rewritten = rank_contract::DataFiles(two)[1];
  WriteGz(rewritten, big + "rewritten");
  EXPECT_EQ(c.Ensure(two), 1);
  c.WaitIdle();
  CachedFile read = LoadGzCached(rewritten, c.dir());
  EXPECT_EQ(read.note, "cache hit (by content)");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(read.bytes->data()), read.bytes->size()),
            big + "rewritten");
  int entries = 0, records = 0;
  for (const auto& e : fs::directory_iterator(c.dir())) {
    const std::string name = e.path().filename().string();
    const size_t at = name.find(".sha256-");
    if (at != std::string::npos && name.size() == at + 8 + 64) ++entries;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".ref") == 0) {
      ++records;  // what a job's file hashed to (RecordedSha256)
      continue;
    }
    // The jobs' paths have no entry, and their locks are gone once filled.
    EXPECT_NE(at, std::string::npos) << "left: " << name;
  }
  EXPECT_EQ(entries, 5) << "one entry per distinct file, however many jobs ship it";
  EXPECT_EQ(records, 8) << "one record per job file";
  for (const std::string& f : rank_contract::DataFiles(two)) {
    EXPECT_NE(RecordedSha256(f, c.dir(), geteuid()), "") << f;
  }

  // Another account's files are not read for a job.
  const std::string three = tmp_.str() + "/job-root/j-3";
  fs::create_directories(three);
  for (const std::string& f : rank_contract::DataFiles(three)) WriteGz(f, "other bytes");
  EXPECT_EQ(c.Ensure(three, static_cast<int64_t>(geteuid()) + 1), 4);
  c.WaitIdle();
  EXPECT_EQ(c.counts().failed, 4);
  EXPECT_EQ(c.counts().filled, 9);
  EXPECT_EQ(LoadGzCached(rank_contract::DataFiles(three)[0], c.dir()).note,
            "not cached (no entry: the worker has not cached it)");

  EXPECT_EQ(c.Ensure(tmp_.str() + "/missing"), 0);
  // A root's path through a symlink outside the roots is still the root's data.
  fs::create_directory_symlink(data_, tmp_.str() + "/link");
  EXPECT_EQ(c.Ensure(tmp_.str() + "/link"), 4);
  c.WaitIdle();
  EXPECT_EQ(LoadGzCached(rank_contract::DataFiles(tmp_.str() + "/link")[0], c.dir()).note,
            "cache hit");
}

TEST_F(WorkerDataCacheTest, PerUserCachesOfEarlierVersionsGoAndASymlinkIsRefused) {
  fs::create_directories(work_ + "/data-cache/1234");
  { std::ofstream(work_ + "/data-cache/1234/old") << "x"; }
  auto cache = WorkerDataCache::Open(work_, {root_});
  ASSERT_TRUE(cache.ok());
  EXPECT_FALSE(fs::exists(work_ + "/data-cache/1234"));
  cache->reset();

  fs::remove_all(work_ + "/data-cache/shared");
  fs::create_directory_symlink(tmp_.str(), work_ + "/data-cache/shared");
  auto refused = WorkerDataCache::Open(work_, {root_});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("symlink"), std::string::npos)
      << refused.status().message();
}

}  // namespace worker_data_cache_test
}  // namespace convoy

// The worker's data cache (worker/files/data_cache.h): one directory the worker owns, the per-user
// caches of earlier versions removed; a data set under a root is filled once on the cache's
// thread and again only when its source changes; a job's own data is never cached.
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

TEST_F(WorkerDataCacheTest, AJobsOwnDataOutsideTheRootsIsNotCached) {
  const std::string own = tmp_.str() + "/job-root/j-1";
  fs::create_directories(own);
  for (const std::string& f : rank_contract::DataFiles(own)) WriteGz(f, "private");
  auto cache = WorkerDataCache::Open(work_, {root_});
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->Ensure(own), 0);
  EXPECT_EQ((*cache)->Ensure(tmp_.str() + "/missing"), 0);
  // A root's path through a symlink outside the roots is still the root's data.
  fs::create_directory_symlink(data_, tmp_.str() + "/link");
  EXPECT_EQ((*cache)->Ensure(tmp_.str() + "/link"), 4);
  (*cache)->WaitIdle();
  for (const auto& e : fs::directory_iterator((*cache)->dir())) {
    EXPECT_EQ(e.path().string().find("private"), std::string::npos);
  }
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

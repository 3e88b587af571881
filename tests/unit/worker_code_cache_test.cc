// The worker's code cache (worker/link/code_fetch.h): an archive is kept for an hour after its
// last use, then removed; a fetch that died with the last worker leaves no `.part` behind.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/code_archive.h"
#include "tests/support/temp_dir.h"
#include "worker/link/code_fetch.h"

namespace convoy {
namespace worker_code_cache_test {

namespace fs = std::filesystem;

TEST(CodeCacheTest, IdleArchivesAndDeadFetchesAreRemoved) {
  testing::TempDir work("code-cache");
  fs::create_directories(work.path() / "code");
  const std::string idle(64, 'a'), used(64, 'b');
  auto make = [&](const std::string& name, std::chrono::hours age) {
    const fs::path p = work.path() / "code" / name;
    std::ofstream(p) << "bytes";
    fs::last_write_time(p, fs::file_time_type::clock::now() - age);
    return p;
  };
  const fs::path idle_archive = make(idle + ".tar.gz", std::chrono::hours(2));
  const fs::path used_archive = make(used + ".tar.gz", std::chrono::hours(0));
  const fs::path fresh_part = make(idle + ".tar.gz.part", std::chrono::hours(0));
  const fs::path other = make("README", std::chrono::hours(5));  // not the cache's: left alone
  EXPECT_EQ(CollectCodeCache(work.str(), kCodeCacheIdleS, false), 1);
  EXPECT_FALSE(fs::exists(idle_archive));
  EXPECT_TRUE(fs::exists(used_archive));
  EXPECT_TRUE(fs::exists(fresh_part));  // a fetch in progress
  EXPECT_TRUE(fs::exists(other));
  EXPECT_EQ(CodeArchivePath(work.str(), used), used_archive.string());
  // At the worker's start, every `.part` goes: its fetch died with the last worker.
  EXPECT_EQ(CollectCodeCache(work.str(), kCodeCacheIdleS, true), 0);
  EXPECT_FALSE(fs::exists(fresh_part));
  EXPECT_TRUE(fs::exists(used_archive));
}

}  // namespace worker_code_cache_test
}  // namespace convoy

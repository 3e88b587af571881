// The per-host data cache (trainer/data_cache.h): built once, then mapped; a truncated,
// altered or replaced cache file, a damaged sidecar or a changed source is detected and the
// entry rebuilt; a directory of another user is not used.
#include "trainer/data_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace convoy::trainer {
namespace {

namespace fs = std::filesystem;

class DataCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/convoy-data-cache-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    source_ = root_ + "/data/train-images-idx3-ubyte.gz";
    cache_ = root_ + "/cache";
    fs::create_directories(root_ + "/data");
    WriteSource(Content(300000, 1));
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::string Content(size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(gen() % 7);  // compressible, like images
    return s;
  }
  void WriteSource(const std::string& bytes) {
    gzFile f = gzopen(source_.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(f);
  }
  // The cached data file (the one entry that is not a sidecar or lock).
  std::string Entry() const {
    for (const auto& e : fs::directory_iterator(cache_)) {
      const std::string p = e.path().string();
      if (p.find(".meta") == std::string::npos && p.find(".lock") == std::string::npos) return p;
    }
    return "";
  }
  static std::string AsString(const CachedFile& f) {
    return std::string(reinterpret_cast<const char*>(f.bytes->data()), f.bytes->size());
  }

  std::string root_, source_, cache_;
};

TEST_F(DataCacheTest, BuiltOnceThenMappedFromTheCache) {
  const std::string want = Content(300000, 1);
  CachedFile first = LoadGzCached(source_, cache_);
  EXPECT_EQ(first.note, "cached (no entry)");
  EXPECT_EQ(AsString(first), want);
  struct stat st {};
  ASSERT_EQ(stat(cache_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "the cache directory is private";
  const std::string entry = Entry();
  ASSERT_FALSE(entry.empty());
  EXPECT_EQ(fs::file_size(entry), want.size());
  CachedFile second = LoadGzCached(source_, cache_);
  EXPECT_EQ(second.note, "cache hit");
  EXPECT_EQ(AsString(second), want);
  // No temporary files are left behind.
  for (const auto& e : fs::directory_iterator(cache_)) {
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST_F(DataCacheTest, TruncatedCacheFileIsRebuilt) {
  const std::string want = Content(300000, 1);
  LoadGzCached(source_, cache_);
  fs::resize_file(Entry(), 1000);
  CachedFile again = LoadGzCached(source_, cache_);
  EXPECT_NE(again.note.find("rebuilt"), std::string::npos) << again.note;
  EXPECT_NE(again.note.find("truncated"), std::string::npos) << again.note;
  EXPECT_EQ(AsString(again), want);
  EXPECT_EQ(fs::file_size(Entry()), want.size());
  EXPECT_EQ(LoadGzCached(source_, cache_).note, "cache hit");
}

TEST_F(DataCacheTest, AlteredCacheFileIsRebuilt) {
  const std::string want = Content(300000, 1);
  LoadGzCached(source_, cache_);
  const std::string entry = Entry();
  struct stat before {};
  ASSERT_EQ(stat(entry.c_str(), &before), 0);
  {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(12345);
    f.put(static_cast<char>(99));
  }
  CachedFile again = LoadGzCached(source_, cache_);
  EXPECT_NE(again.note.find("rebuilt"), std::string::npos) << again.note;
  EXPECT_EQ(AsString(again), want);

  // The same change with the file's times put back: only the checksum can tell.
  LoadGzCached(source_, cache_);
  const std::string entry2 = Entry();
  struct stat st {};
  ASSERT_EQ(stat(entry2.c_str(), &st), 0);
  {
    std::fstream f(entry2, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200000);
    f.put(static_cast<char>(42));
  }
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, entry2.c_str(), times, 0), 0);
  CachedFile third = LoadGzCached(source_, cache_);
  EXPECT_EQ(third.note, "rebuilt (the cached file's checksum differs)");
  EXPECT_EQ(AsString(third), want);
}

TEST_F(DataCacheTest, DamagedSidecarOrChangedSourceIsRebuilt) {
  LoadGzCached(source_, cache_);
  {
    std::ofstream meta(Entry() + ".meta", std::ios::trunc);
    meta << "convoy-data-cache 1\nsize banana\n";
  }
  CachedFile again = LoadGzCached(source_, cache_);
  EXPECT_EQ(again.note, "rebuilt (the sidecar is malformed)");

  const std::string changed = Content(123456, 2);
  WriteSource(changed);
  CachedFile after = LoadGzCached(source_, cache_);
  EXPECT_EQ(after.note, "rebuilt (the source changed)");
  EXPECT_EQ(AsString(after), changed);
}

TEST_F(DataCacheTest, OpenDirectoryIsMadePrivateAndForeignOneIsNotUsed) {
  fs::create_directories(cache_);
  ASSERT_EQ(chmod(cache_.c_str(), 0777), 0);
  LoadGzCached(source_, cache_);
  struct stat st {};
  ASSERT_EQ(stat(cache_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  const std::string link = root_ + "/link";
  fs::create_directory_symlink(cache_, link);
  CachedFile via_link = LoadGzCached(source_, link);
  EXPECT_EQ(via_link.note.rfind("not cached", 0), 0u) << via_link.note;
  EXPECT_EQ(AsString(via_link), Content(300000, 1));

  if (geteuid() == 0) {
    ASSERT_EQ(chown(cache_.c_str(), 65534, 65534), 0);
    CachedFile foreign = LoadGzCached(source_, cache_);
    EXPECT_EQ(foreign.note.rfind("not cached", 0), 0u) << foreign.note;
    EXPECT_EQ(AsString(foreign), Content(300000, 1));
  }
}

TEST_F(DataCacheTest, BadSourceStillThrows) {
  EXPECT_THROW(LoadGzCached(root_ + "/data/missing.gz", cache_), std::runtime_error);
  {
    std::ofstream f(source_, std::ios::trunc | std::ios::binary);
    f << "\x1f\x8b not really gzip";
  }
  EXPECT_THROW(LoadGzCached(source_, cache_), std::runtime_error);
}

TEST(Checksum64Test, DependsOnEveryByteAndTheLength) {
  std::string s(1000, 'a');
  const auto sum = [](const std::string& x) {
    return Checksum64(reinterpret_cast<const uint8_t*>(x.data()), x.size());
  };
  const uint64_t base = sum(s);
  for (size_t i : {0, 7, 31, 32, 500, 999}) {
    std::string t = s;
    t[i] = 'b';
    EXPECT_NE(sum(t), base) << i;
  }
  EXPECT_NE(sum(s.substr(0, 999)), base);
  EXPECT_NE(sum(s + std::string(1, '\0')), base);
}

}  // namespace
}  // namespace convoy::trainer

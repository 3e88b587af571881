// The worker's data cache (common/data_cache.h): the owner fills an entry once, readers map
// it; a truncated, altered or replaced entry, a damaged sidecar or a changed source is never
// read (the reader decompresses the source itself) and the owner rebuilds it; a reader trusts
// only a directory and entries that no one but their owner (root or itself) may write, and
// waits while the owner fills; a job's identity cannot change what another job reads; data
// outside the roots is cached by the SHA-256 of its bytes, within a limit.
#include "common/data_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <string>
#include <thread>

namespace convoy {
namespace common_data_cache_test {

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
    ASSERT_EQ(PrepareCacheDir(cache_), "");
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

TEST_F(DataCacheTest, FilledOnceByTheOwnerThenMappedByReaders) {
  const std::string want = Content(300000, 1);
  CachedFile before = LoadGzCached(source_, cache_);
  EXPECT_EQ(before.note, "not cached (no entry: the worker has not cached it)");
  EXPECT_EQ(AsString(before), want);
  EXPECT_TRUE(fs::is_empty(cache_)) << "a reader never writes";

  EXPECT_EQ(FillGzEntry(source_, cache_), "cached (no entry)");
  struct stat st {};
  ASSERT_EQ(stat(cache_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u) << "ranks open entries by name, nobody lists them";
  const std::string entry = Entry();
  ASSERT_FALSE(entry.empty());
  EXPECT_EQ(fs::file_size(entry), want.size());
  ASSERT_EQ(stat(entry.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  CachedFile hit = LoadGzCached(source_, cache_);
  EXPECT_EQ(hit.note, "cache hit");
  EXPECT_EQ(AsString(hit), want);
  EXPECT_EQ(FillGzEntry(source_, cache_), "cache hit");
  EXPECT_TRUE(EntryLooksCurrent(source_, cache_));
  for (const auto& e : fs::directory_iterator(cache_)) {
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST_F(DataCacheTest, TruncatedEntryIsNotReadAndTheOwnerRebuildsIt) {
  const std::string want = Content(300000, 1);
  FillGzEntry(source_, cache_);
  fs::resize_file(Entry(), 1000);
  EXPECT_FALSE(EntryLooksCurrent(source_, cache_));
  CachedFile read = LoadGzCached(source_, cache_);
  EXPECT_NE(read.note.find("truncated"), std::string::npos) << read.note;
  EXPECT_EQ(read.note.rfind("not cached", 0), 0u) << read.note;
  EXPECT_EQ(AsString(read), want);
  const std::string note = FillGzEntry(source_, cache_);
  EXPECT_NE(note.find("rebuilt"), std::string::npos) << note;
  EXPECT_EQ(fs::file_size(Entry()), want.size());
  EXPECT_EQ(LoadGzCached(source_, cache_).note, "cache hit");
}

TEST_F(DataCacheTest, AlteredEntryIsNotReadEvenWithItsTimesPutBack) {
  const std::string want = Content(300000, 1);
  FillGzEntry(source_, cache_);
  const std::string entry = Entry();
  struct stat st {};
  ASSERT_EQ(stat(entry.c_str(), &st), 0);
  {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200000);
    f.put(static_cast<char>(42));
  }
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, entry.c_str(), times, 0), 0);
  CachedFile read = LoadGzCached(source_, cache_);
  EXPECT_EQ(read.note, "not cached (the cached file's checksum differs)");
  EXPECT_EQ(AsString(read), want);
  EXPECT_EQ(FillGzEntry(source_, cache_), "rebuilt (the cached file's checksum differs)");
  EXPECT_EQ(AsString(LoadGzCached(source_, cache_)), want);
}

TEST_F(DataCacheTest, DamagedSidecarOrChangedSourceIsRebuilt) {
  FillGzEntry(source_, cache_);
  {
    std::ofstream meta(Entry() + ".meta", std::ios::trunc);
    meta << "convoy-data-cache 1\nsize banana\n";
  }
  EXPECT_EQ(LoadGzCached(source_, cache_).note.rfind("not cached", 0), 0u);
  EXPECT_EQ(FillGzEntry(source_, cache_), "rebuilt (the sidecar is malformed)");

  const std::string changed = Content(123456, 2);
  WriteSource(changed);
  EXPECT_FALSE(EntryLooksCurrent(source_, cache_));
  CachedFile read = LoadGzCached(source_, cache_);
  EXPECT_EQ(AsString(read), changed) << "a changed source is never served from the old entry";
  EXPECT_EQ(FillGzEntry(source_, cache_), "rebuilt (the source changed)");
  EXPECT_EQ(AsString(LoadGzCached(source_, cache_)), changed);
}

TEST_F(DataCacheTest, ReadersTrustOnlyWhatNoOneButTheOwnerMayWrite) {
  const std::string want = Content(300000, 1);
  FillGzEntry(source_, cache_);
  ASSERT_EQ(LoadGzCached(source_, cache_).note, "cache hit");
  // An entry others may write.
  ASSERT_EQ(chmod(Entry().c_str(), 0666), 0);
  EXPECT_EQ(LoadGzCached(source_, cache_).note.rfind("not cached", 0), 0u);
  ASSERT_EQ(chmod(Entry().c_str(), 0644), 0);
  // A directory others may write.
  ASSERT_EQ(chmod(cache_.c_str(), 0777), 0);
  CachedFile open_dir = LoadGzCached(source_, cache_);
  EXPECT_EQ(open_dir.note, "not cached (" + cache_ + " may be written by others)");
  EXPECT_EQ(AsString(open_dir), want);
  ASSERT_EQ(chmod(cache_.c_str(), 0711), 0);
  // A symlink to the cache.
  const std::string link = root_ + "/link";
  fs::create_directory_symlink(cache_, link);
  EXPECT_EQ(LoadGzCached(source_, link).note, "not cached (" + link + " is not a directory)");
  if (geteuid() != 0) GTEST_SKIP() << "the rest gives files away: needs root";
  // An entry of another user than the directory's owner.
  ASSERT_EQ(chown(Entry().c_str(), 65534, 65534), 0);
  EXPECT_EQ(LoadGzCached(source_, cache_).note.rfind("not cached", 0), 0u);
  ASSERT_EQ(chown(Entry().c_str(), 0, 0), 0);
  // A directory of a user who is neither root nor the reader (another job's identity).
  ASSERT_EQ(chown(cache_.c_str(), 65534, 65534), 0);
  CachedFile foreign = LoadGzCached(source_, cache_);
  EXPECT_NE(foreign.note.find("belongs to uid 65534"), std::string::npos) << foreign.note;
  EXPECT_EQ(AsString(foreign), want);
}

TEST_F(DataCacheTest, AReaderWaitsWhileTheOwnerFills) {
  std::string why;
  EntryLock lock = TryLockEntry(source_, cache_, &why);
  ASSERT_TRUE(lock.held()) << why;
  std::string second_why;
  EXPECT_FALSE(TryLockEntry(source_, cache_, &second_why).held());
  EXPECT_EQ(second_why, "a fill is under way");
  auto reader = std::async(std::launch::async, [&] { return LoadGzCached(source_, cache_); });
  EXPECT_EQ(reader.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "the reader decompressed its own copy instead of waiting for the fill";
  EXPECT_EQ(FillGzEntry(source_, cache_, std::move(lock)), "cached (no entry)");
  CachedFile read = reader.get();
  EXPECT_EQ(read.note, "cache hit (waited for the worker's fill)");
  EXPECT_EQ(AsString(read), Content(300000, 1));
}

// A rank waiting for the fill says it is alive (its heartbeats keep hang detection quiet):
// the callback runs while the lock is held, and the read still ends as a hit.
TEST_F(DataCacheTest, AReaderWaitingForTheFillSaysItIsAlive) {
  std::string why;
  EntryLock lock = TryLockEntry(source_, cache_, &why);
  ASSERT_TRUE(lock.held()) << why;
  std::atomic<int> calls{0};
  auto reader = std::async(std::launch::async, [&] {
    return LoadGzCached(source_, cache_, [&] { calls.fetch_add(1); });
  });
  for (int i = 0; i < 1000 && calls.load() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(calls.load(), 2) << "no sign of life while the fill was awaited";
  EXPECT_EQ(reader.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  EXPECT_EQ(FillGzEntry(source_, cache_, std::move(lock)), "cached (no entry)");
  CachedFile read = reader.get();
  EXPECT_EQ(read.note, "cache hit (waited for the worker's fill)");
  EXPECT_EQ(AsString(read), Content(300000, 1));
}

// What a rank of another job (another uid, not root) can do to the cache: read it, nothing
// else. Each attempt's errno comes back through a pipe; the entry's bytes are checked after.
TEST_F(DataCacheTest, AnotherIdentityCannotChangeWhatAJobReads) {
  if (geteuid() != 0) GTEST_SKIP() << "switching to a job's identity needs root";
  const std::string want = Content(300000, 1);
  FillGzEntry(source_, cache_);
  const std::string entry = Entry();
  ASSERT_EQ(chmod(root_.c_str(), 0711), 0);  // mkdtemp's 0700 would stop the reader at once
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    const gid_t gid = 60123;
    if (setgroups(1, &gid) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(60123, 60123, 60123) != 0) {
      _exit(2);
    }
    std::string out;
    auto attempt = [&](const char* what, bool ok) {
      out += std::string(what) + "=" + (ok ? "OK" : std::to_string(errno)) + ";";
    };
    attempt("write-entry", open(entry.c_str(), O_WRONLY) >= 0);
    attempt("write-sidecar", open((entry + ".meta").c_str(), O_WRONLY | O_TRUNC) >= 0);
    attempt("unlink-entry", unlink(entry.c_str()) == 0);
    attempt("rename-entry", rename(entry.c_str(), (entry + ".x").c_str()) == 0);
    attempt("plant-file", open((cache_ + "/planted").c_str(), O_WRONLY | O_CREAT, 0644) >= 0);
    attempt("chmod-dir", chmod(cache_.c_str(), 0777) == 0);
    attempt("chmod-entry", chmod(entry.c_str(), 0666) == 0);
    attempt("list-dir", opendir(cache_.c_str()) != nullptr);
    CachedFile read = LoadGzCached(source_, cache_);
    out += "read=" + read.note + (AsString(read) == want ? ":same" : ":different");
    if (write(pipefd[1], out.data(), out.size()) < 0) _exit(3);
    _exit(0);
  }
  close(pipefd[1]);
  std::string got;
  char buf[1024];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string eacces = std::to_string(EACCES), eperm = std::to_string(EPERM);
  for (const char* what :
       {"write-entry", "write-sidecar", "unlink-entry", "rename-entry", "plant-file", "list-dir"}) {
    EXPECT_NE(got.find(std::string(what) + "=" + eacces + ";"), std::string::npos)
        << what << ": " << got;
  }
  for (const char* what : {"chmod-dir", "chmod-entry"}) {
    EXPECT_NE(got.find(std::string(what) + "=" + eperm + ";"), std::string::npos)
        << what << ": " << got;
  }
  EXPECT_NE(got.find("read=cache hit:same"), std::string::npos) << got;
  EXPECT_EQ(AsString(LoadGzCached(source_, cache_)), want);
  EXPECT_EQ(LoadGzCached(source_, cache_).note, "cache hit");
}

// Issue 45: data outside the roots (a job's own, or shipped in its code) is cached under the
// SHA-256 of its bytes: the same bytes anywhere are one entry, other bytes are not it.
TEST_F(DataCacheTest, DataOutsideTheRootsIsCachedByItsBytes) {
  if (!ContentEntries()) GTEST_SKIP() << "built without SHA-256";
  const std::string want = Content(300000, 1);
  const std::string a = root_ + "/job-a/train-images-idx3-ubyte.gz";
  const std::string b = root_ + "/job-b/train-images-idx3-ubyte.gz";
  const std::string c = root_ + "/job-c/train-images-idx3-ubyte.gz";
  for (const char* dir : {"/job-a", "/job-b", "/job-c"}) fs::create_directory(root_ + dir);
  fs::copy_file(source_, a);
  fs::copy_file(source_, b);
  WriteSource(Content(300000, 2));
  fs::copy_file(source_, c);

  const ContentFill fill = FillGzContentEntry(a, cache_, -1, int64_t{1} << 30);
  EXPECT_EQ(fill.note, "cached");
  ASSERT_EQ(fill.sha256.size(), 64u);
  EXPECT_EQ(fill.entry, ContentEntryPath(cache_, a, fill.sha256));
  EXPECT_EQ(fill.entry, cache_ + "/train-images-idx3-ubyte.sha256-" + fill.sha256);
  EXPECT_EQ(fs::file_size(fill.entry), want.size());

  // The fill recorded what `a` hashed to at its version: its reader need not hash it.
  EXPECT_EQ(RecordedSha256(a, cache_, geteuid()), fill.sha256);
  EXPECT_EQ(RecordedSha256(b, cache_, geteuid()), "") << "b was never filled";
  EXPECT_EQ(RecordedSha256(a, cache_, geteuid() + 1), "") << "not the owner's record";
  CachedFile own = LoadGzCached(a, cache_);
  EXPECT_EQ(own.note, "cache hit (by content)");
  EXPECT_EQ(AsString(own), want);
  CachedFile same = LoadGzCached(b, cache_);
  EXPECT_EQ(same.note, "cache hit (by content)");
  EXPECT_EQ(AsString(same), want);
  CachedFile other = LoadGzCached(c, cache_);
  EXPECT_EQ(other.note, "not cached (no entry: the worker has not cached it)");
  EXPECT_EQ(AsString(other), Content(300000, 2));
  EXPECT_EQ(FillGzContentEntry(b, cache_, -1, int64_t{1} << 30).note, "cache hit");
  // Rewritten after its fill (even to the same size, its times put back): its record no longer
  // holds, and it is read as it is now.
  {
    struct stat before {};
    ASSERT_EQ(stat(a.c_str(), &before), 0);
    fs::copy_file(c, a, fs::copy_options::overwrite_existing);
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(utimensat(AT_FDCWD, a.c_str(), times, 0), 0);
  }
  EXPECT_EQ(RecordedSha256(a, cache_, geteuid()), "");
  EXPECT_EQ(AsString(LoadGzCached(a, cache_)), Content(300000, 2));
  const ContentFill third = FillGzContentEntry(c, cache_, -1, int64_t{1} << 30);
  EXPECT_EQ(third.note, "cached");
  EXPECT_NE(third.sha256, fill.sha256);
  EXPECT_EQ(AsString(LoadGzCached(c, cache_)), Content(300000, 2));

  // An entry altered after its fill is not read: its sidecar's checksum still guards it.
  {
    std::fstream f(fill.entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x55');
  }
  CachedFile altered = LoadGzCached(b, cache_);
  EXPECT_EQ(altered.note,
            "not cached (no entry: the worker has not cached it; by content: the cached file "
            "was modified or replaced)");
  EXPECT_EQ(AsString(altered), want);
}

// The worker reads a job's file into memory of its own before hashing it, only a regular file
// of the job's account, not through a symlink, and within its limit (compressed and not).
TEST_F(DataCacheTest, AContentFillReadsOnlyTheJobsOwnFileWithinTheLimit) {
  if (!ContentEntries()) GTEST_SKIP() << "built without SHA-256";
  const std::string own = root_ + "/job-a/train-images-idx3-ubyte.gz";
  fs::create_directory(root_ + "/job-a");
  fs::copy_file(source_, own);
  auto fails = [&](const std::string& path, int64_t owner, int64_t max) -> std::string {
    try {
      FillGzContentEntry(path, cache_, owner, max);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  const int64_t big = int64_t{1} << 30;
  EXPECT_NE(fails(own, geteuid() + 1, big)
                .find("belongs to uid " + std::to_string(geteuid()) + ", not to the job's "),
            std::string::npos);
  fs::create_symlink(own, root_ + "/job-a/link.gz");
  EXPECT_NE(fails(root_ + "/job-a/link.gz", -1, big).find("link.gz: cannot open"),
            std::string::npos);
  const auto compressed = static_cast<int64_t>(fs::file_size(own));
  EXPECT_NE(fails(own, -1, compressed - 1).find("over the cache's limit"), std::string::npos);
  EXPECT_NE(fails(own, -1, compressed + 1).find("decompresses to more than"), std::string::npos)
      << "a gzip bomb stops at the limit";
  EXPECT_NE(fails(root_ + "/job-a/missing.gz", -1, big).find("missing.gz: cannot open"),
            std::string::npos);
  for (const auto& e : fs::directory_iterator(cache_)) {
    const std::string p = e.path().string();
    EXPECT_TRUE(p.size() > 5 && p.compare(p.size() - 5, 5, ".lock") == 0) << "left: " << p;
  }
  EXPECT_EQ(fails(own, geteuid(), big), "");
}

// The content entries' total stays under the limit: the least recently used (by their
// sidecar's time, which a fill's hit renews) go first, never the one just filled.
TEST_F(DataCacheTest, TheLeastRecentlyUsedContentEntriesGoFirst) {
  if (!ContentEntries()) GTEST_SKIP() << "built without SHA-256";
  std::vector<std::string> sources, entries;
  for (unsigned i = 0; i < 3; ++i) {
    const std::string dir = root_ + "/job-" + std::to_string(i);
    fs::create_directory(dir);
    WriteSource(Content(300000, 10 + i));
    sources.push_back(dir + "/train-images-idx3-ubyte.gz");
    fs::copy_file(source_, sources.back());
    entries.push_back(FillGzContentEntry(sources.back(), cache_, -1, int64_t{1} << 30).entry);
  }
  auto set_used = [](const std::string& entry, time_t t) {
    const struct timespec times[2] = {{t, 0}, {t, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, (entry + ".meta").c_str(), times, 0), 0);
  };
  set_used(entries[0], 100);
  set_used(entries[1], 200);
  set_used(entries[2], 300);
  EXPECT_EQ(FillGzContentEntry(sources[0], cache_, -1, int64_t{1} << 30).note, "cache hit");
  EXPECT_EQ(EvictContentEntries(cache_, 3 * 300000, ""), 0);
  EXPECT_EQ(EvictContentEntries(cache_, 2 * 300000, ""), 1);
  EXPECT_FALSE(fs::exists(entries[1])) << "the least recently used";
  EXPECT_FALSE(fs::exists(entries[1] + ".meta"));
  EXPECT_TRUE(fs::exists(entries[0])) << "renewed by its fill's hit";
  EXPECT_TRUE(fs::exists(entries[2]));
  EXPECT_EQ(LoadGzCached(sources[1], cache_).note,
            "not cached (no entry: the worker has not cached it)");
  // A source that is gone (its job's files deleted): its record goes at the next eviction.
  const std::string ref = EntryPath(cache_, sources[1]) + ".ref";
  ASSERT_TRUE(fs::exists(ref));
  fs::remove(sources[1]);
  set_used(entries[2], 50);
  EXPECT_EQ(EvictContentEntries(cache_, 300000, entries[2]), 1);
  EXPECT_FALSE(fs::exists(ref));
  EXPECT_TRUE(fs::exists(EntryPath(cache_, sources[2]) + ".ref"));
  EXPECT_TRUE(fs::exists(entries[2])) << "the one to keep stays";
  EXPECT_FALSE(fs::exists(entries[0]));
  EXPECT_EQ(AsString(LoadGzCached(sources[2], cache_)), Content(300000, 12));
}

TEST_F(DataCacheTest, BadSourceStillThrows) {
  EXPECT_THROW(LoadGzCached(root_ + "/data/missing.gz", cache_), std::runtime_error);
  EXPECT_THROW(FillGzEntry(root_ + "/data/missing.gz", cache_), std::runtime_error);
  {
    std::ofstream f(source_, std::ios::trunc | std::ios::binary);
    f << "\x1f\x8b not really gzip";
  }
  EXPECT_THROW(LoadGzCached(source_, cache_), std::runtime_error);
  EXPECT_THROW(FillGzEntry(source_, cache_), std::runtime_error);
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

}  // namespace common_data_cache_test
}  // namespace convoy

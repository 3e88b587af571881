// common/code_archive: what `convoy submit --code` packs and what a worker unpacks.
#include "common/code_archive.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tests/support/temp_dir.h"

namespace convoy {
namespace common_code_archive_test {

namespace fs = std::filesystem;
using testing::TempDir;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string Read(const fs::path& p) {
  std::ifstream f(p);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A .tar.gz of one hand-made entry (to try what the packer never writes).
std::string OneEntry(const std::string& name, char type, const std::string& data = "") {
  std::string tar(512, '\0');
  std::memcpy(tar.data(), name.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(tar.data() + 124, 12, "%011o", static_cast<unsigned>(data.size()));
  tar[156] = type;
  std::memcpy(tar.data() + 257, "ustar", 6);
  tar += data;
  tar.append((512 - data.size() % 512) % 512, '\0');
  tar.append(1024, '\0');
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, tar.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(tar.data());
  z.avail_in = static_cast<uInt>(tar.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(CodeArchiveTest, PacksHonouringIgnoreFilesAndUnpacksTheSameTree) {
  TempDir src, dst;
  const fs::path s = src.path();
  Write(s / "train.py", "print('hi')\n");
  Write(s / "pkg/model.py", "x = 1\n");
  Write(s / "pkg/__pycache__/model.pyc", "junk");
  Write(s / "runs/out.log", "junk");
  Write(s / "data.bin", "junk");
  Write(s / "keep/data.bin", "kept: the rule is anchored");
  Write(s / ".git/HEAD", "ref");
  Write(s / ".gitignore", "__pycache__/\n# comment\n*.log\n");
  Write(s / ".convoyignore", "/data.bin\n");
  const std::string deep = std::string(60, 'd') + "/" + std::string(60, 'e');
  Write(s / deep / "f.txt", "long path");  // the ustar prefix field
  fs::create_symlink("/etc/passwd", s / "link");
  chmod((s / "train.py").c_str(), 0755);

  auto packed = PackCodeDirectory(s.string());
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  auto again = PackCodeDirectory(s.string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(packed->archive, again->archive);  // deterministic: one hash per tree

  auto files = UnpackCodeArchive(packed->archive, dst.path().string(), -1, -1);
  ASSERT_TRUE(files.ok()) << files.status().message();
  const fs::path d = dst.path();
  EXPECT_EQ(Read(d / "train.py"), "print('hi')\n");
  EXPECT_EQ(Read(d / "pkg/model.py"), "x = 1\n");
  EXPECT_EQ(Read(d / "keep/data.bin"), "kept: the rule is anchored");
  EXPECT_EQ(Read(d / deep / "f.txt"), "long path");
  EXPECT_FALSE(fs::exists(d / "pkg/__pycache__"));
  EXPECT_FALSE(fs::exists(d / "runs/out.log"));
  EXPECT_FALSE(fs::exists(d / "data.bin"));
  EXPECT_FALSE(fs::exists(d / ".git"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(d / "link")));
  struct stat st {};
  ASSERT_EQ(stat((d / "train.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
  ASSERT_EQ(stat((d / "pkg/model.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

// Files that are compressed already (a shipped data set's .gz files) are stored, the rest
// deflated, in one gzip stream: what unpacks is the same tree, byte for byte, the archive is
// deterministic and the text is still compressed.
TEST(CodeArchiveTest, CompressedFilesAreStoredAndTheTreeUnpacksTheSame) {
  TempDir src, dst;
  const fs::path s = src.path();
  std::string random(300000, '\0');
  uint32_t x = 12345;
  for (char& c : random) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  const std::string text(200000, 'a');
  const std::map<std::string, std::string> files = {
      {"a.py", text},
      {"data/train-images-idx3-ubyte.gz", "\x1f\x8b" + random},
      {"data/small.gz", "\x1f\x8b" + random.substr(0, 1000)},
      {"data/zeros.bin", std::string(100000, '\0')},
      {"img/photo.png", "\x89PNG" + random.substr(1000, 150000)},
      {"z.py", "x = 1\n"},
      {"empty.gz", ""}};
  for (const auto& [name, bytes] : files) {
    fs::create_directories((s / name).parent_path());
    std::ofstream(s / name, std::ios::binary) << bytes;
  }
  auto packed = PackCodeDirectory(s.string());
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  EXPECT_EQ(PackCodeDirectory(s.string())->archive, packed->archive);
  const size_t incompressible = 2 + random.size() + 4 + 150000;
  EXPECT_LT(packed->archive.size(), incompressible + 20000) << "the text was not compressed";
  auto unpacked = UnpackCodeArchive(packed->archive, dst.path().string(), -1, -1);
  ASSERT_TRUE(unpacked.ok()) << unpacked.status().message();
  EXPECT_EQ(*unpacked, static_cast<int64_t>(files.size()));
  for (const auto& [name, bytes] : files) {
    std::ifstream f(dst.path() / name, std::ios::binary);
    std::ostringstream got;
    got << f.rdbuf();
    EXPECT_EQ(got.str(), bytes) << name;
  }
}

TEST(CodeArchiveTest, RefusesOverTheLimitNamingIt) {
  TempDir src;
  Write(src.path() / "big", std::string(2 << 20, 'x'));
  auto packed = PackCodeDirectory(src.path().string(), 1 << 20);
  ASSERT_FALSE(packed.ok());
  EXPECT_NE(packed.status().message().find("1 MB"), std::string::npos) << packed.status().message();
}

TEST(CodeArchiveTest, UnpackRefusesEscapes) {
  TempDir dst, outside;
  const std::string d = dst.path().string();
  auto abs = UnpackCodeArchive(OneEntry("/tmp/evil", '0', "x"), d, -1, -1);
  EXPECT_FALSE(abs.ok());
  auto dotdot = UnpackCodeArchive(OneEntry("a/../../evil", '0', "x"), d, -1, -1);
  ASSERT_FALSE(dotdot.ok());
  EXPECT_NE(dotdot.status().message().find(".."), std::string::npos);
  auto link = UnpackCodeArchive(OneEntry("l", '2'), d, -1, -1);
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.status().message().find("no links"), std::string::npos);
  // A symlink already in the job's directory is never followed.
  fs::create_directory_symlink(outside.path(), dst.path() / "sub");
  auto through = UnpackCodeArchive(OneEntry("sub/f", '0', "x"), d, -1, -1);
  EXPECT_FALSE(through.ok());
  EXPECT_FALSE(fs::exists(outside.path() / "f"));
  EXPECT_FALSE(UnpackCodeArchive("not gzip", d, -1, -1).ok());
}

// Two workers sharing a job root unpack the same code into the same directory at the same
// time (issue 32: one failed with "cannot write .../convoy_metrics.py: File exists" when the
// other had unpacked it 1 ms before). Both succeed, every file is whole, no temporary file
// is left, and a symlink a rank left at a file's name is replaced, not followed.
TEST(CodeArchiveTest, ConcurrentUnpacksIntoOneDirectoryBothSucceed) {
  TempDir src, dst, outside;
  for (int i = 0; i < 40; ++i) {
    Write(src.path() / ("pkg" + std::to_string(i % 4)) / ("f" + std::to_string(i) + ".py"),
          std::string(1000 + 37 * i, static_cast<char>('a' + i % 26)));
  }
  auto packed = PackCodeDirectory(src.path().string());
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  const std::string d = dst.path().string();
  for (int round = 0; round < 20; ++round) {
    StatusOr<int64_t> a = Status::Internal("not run"), b = Status::Internal("not run");
    std::thread other([&] { b = UnpackCodeArchive(packed->archive, d, -1, -1); });
    a = UnpackCodeArchive(packed->archive, d, -1, -1);
    other.join();
    ASSERT_TRUE(a.ok()) << "round " << round << ": " << a.status().message();
    ASSERT_TRUE(b.ok()) << "round " << round << ": " << b.status().message();
    EXPECT_EQ(*a, 40);
  }
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dst.path())) {
    if (!e.is_regular_file()) continue;
    ++files;
    EXPECT_EQ(e.path().filename().string().find(".convoy-unpack-"), std::string::npos)
        << "left behind: " << e.path();
    EXPECT_EQ(Read(e.path()), Read(src.path() / fs::relative(e.path(), dst.path())));
  }
  EXPECT_EQ(files, 40);

  fs::remove(dst.path() / "pkg0" / "f0.py");
  fs::create_symlink(outside.path() / "victim", dst.path() / "pkg0" / "f0.py");
  ASSERT_TRUE(UnpackCodeArchive(packed->archive, d, -1, -1).ok());
  EXPECT_FALSE(fs::exists(outside.path() / "victim"));
  EXPECT_FALSE(fs::is_symlink(dst.path() / "pkg0" / "f0.py"));
}

TEST(CodeArchiveTest, IgnoreRules) {
  IgnoreRules r;
  r.AddText("*.pyc\nbuild/\n/top.txt\ndocs/*.md\n!keep.pyc\n");
  EXPECT_TRUE(r.Ignored("a/b/x.pyc", false));
  EXPECT_TRUE(r.Ignored("a/build", true));
  EXPECT_FALSE(r.Ignored("a/build", false));  // directories only
  EXPECT_TRUE(r.Ignored("top.txt", false));
  EXPECT_FALSE(r.Ignored("a/top.txt", false));  // anchored
  EXPECT_TRUE(r.Ignored("docs/a.md", false));
  EXPECT_FALSE(r.Ignored("docs/sub/a.md", false));
  EXPECT_TRUE(r.Ignored(".git", true));
}

// Issue 28: a decompression bomb (a 450 MiB file of zeros in half a megabyte) is refused
// while the unpacking process stays far below 64 MB, and nothing is written: the archive is
// read a buffer at a time, and checked whole before the first file lands.
TEST(CodeArchiveTest, ADecompressionBombIsRefusedInBoundedMemory) {
  TempDir dir, dst;
  const std::string bomb = (dir.path() / "bomb.tar.gz").string();
  {
    // Written a buffer at a time too, so that the test itself stays small.
    const uint64_t size = uint64_t{450} << 20;
    std::string header(512, '\0');
    std::memcpy(header.data(), "zeros.bin", 9);
    std::snprintf(header.data() + 124, 12, "%011llo", static_cast<unsigned long long>(size));
    header[156] = '0';
    std::memcpy(header.data() + 257, "ustar", 6);
    std::ofstream out(bomb, std::ios::binary);
    z_stream z{};
    ASSERT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
    std::string zeros(1 << 20, '\0');
    std::string buf(1 << 16, '\0');
    auto feed = [&](const std::string& in, int flush) {
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
      z.avail_in = static_cast<uInt>(in.size());
      do {
        z.next_out = reinterpret_cast<Bytef*>(buf.data());
        z.avail_out = static_cast<uInt>(buf.size());
        deflate(&z, flush);
        out.write(buf.data(), static_cast<std::streamsize>(buf.size() - z.avail_out));
      } while (z.avail_out == 0);
    };
    feed(header, Z_NO_FLUSH);
    for (uint64_t done = 0; done < size; done += zeros.size()) feed(zeros, Z_NO_FLUSH);
    feed(std::string(1024, '\0'), Z_FINISH);
    deflateEnd(&z);
  }
  ASSERT_LT(fs::file_size(bomb), uint64_t{2} << 20);
  auto files = UnpackCodeArchiveFile(bomb, dst.path().string(), -1, -1);
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.status().message().find("unpacks to more than 400 MB"), std::string::npos)
      << files.status().message();
  EXPECT_TRUE(fs::is_empty(dst.path()));
  std::ifstream status("/proc/self/status");
  std::string line;
  long peak_kb = -1;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) peak_kb = std::stol(line.substr(6));
  }
  EXPECT_GT(peak_kb, 0);
  EXPECT_LT(peak_kb, 64 * 1024) << "peak resident memory " << peak_kb << " kB";
  // A file that is not there is NOT_FOUND (the worker says the fetch failed).
  EXPECT_EQ(UnpackCodeArchiveFile((dir.path() / "none").string(), dst.path().string(), -1, -1)
                .status()
                .code(),
            StatusCode::kNotFound);
}

}  // namespace common_code_archive_test
}  // namespace convoy

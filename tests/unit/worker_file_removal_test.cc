// RemoveUnder: a whole tree goes, symlinks are unlinked and never followed, read-only
// directories are no obstacle, and names that could climb out are refused.
#include "worker/files/file_removal.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace convoy {
namespace worker_file_removal_test {

namespace fs = std::filesystem;

TEST(FileRemovalTest, RemovesATreeWithoutFollowingSymlinks) {
  testing::TempDir dir;
  const fs::path root = dir.path() / "jobs";
  const fs::path outside = dir.path() / "outside";
  fs::create_directories(root / "j-1" / "attempt-0" / "deep" / "er");
  fs::create_directories(outside / "sub");
  std::ofstream(outside / "keep") << "x";
  std::ofstream(outside / "sub" / "keep") << "x";
  std::ofstream(root / "j-1" / "attempt-0" / "rank-0.log") << "log";
  std::ofstream(root / "j-1" / "attempt-0" / "deep" / "er" / "f") << "f";
  fs::create_directory_symlink(outside, root / "j-1" / "to-dir");
  fs::create_symlink(outside / "keep", root / "j-1" / "attempt-0" / "to-file");
  fs::create_directory_symlink(outside / "sub", root / "j-1" / "attempt-0" / "deep" / "to-sub");
  // A directory the job made read-only.
  fs::create_directories(root / "j-1" / "locked");
  std::ofstream(root / "j-1" / "locked" / "f") << "f";
  chmod((root / "j-1" / "locked").c_str(), 0500);
  std::ofstream(root / "j-2") << "another job: untouched";

  int64_t removed = 0;
  Status st = RemoveUnder(root.string(), "j-1", &removed);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "j-1")));
  EXPECT_EQ(removed, 11);  // 5 directories, 3 files, 3 symlinks
  EXPECT_TRUE(fs::exists(outside / "keep"));
  EXPECT_TRUE(fs::exists(outside / "sub" / "keep"));
  EXPECT_TRUE(fs::exists(root / "j-2"));
  // Missing is fine; a symlink as the entry itself is only unlinked.
  EXPECT_TRUE(RemoveUnder(root.string(), "j-1").ok());
  fs::create_directory_symlink(outside, root / "j-3");
  EXPECT_TRUE(RemoveUnder(root.string(), "j-3").ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "j-3")));
  EXPECT_TRUE(fs::exists(outside / "sub" / "keep"));
}

TEST(FileRemovalTest, RefusesNamesThatLeaveTheRoot) {
  testing::TempDir dir;
  for (const std::string bad : {"", ".", "..", "a/b", "../x"}) {
    Status st = RemoveUnder(dir.str(), bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(RemoveUnder("relative/root", "x").code(), StatusCode::kInvalidArgument);
  // A root that is a symlink is not entered.
  fs::create_directories(dir.path() / "real" / "x");
  fs::create_directory_symlink(dir.path() / "real", dir.path() / "link");
  EXPECT_FALSE(RemoveUnder((dir.path() / "link").string(), "x").ok());
  EXPECT_TRUE(fs::exists(dir.path() / "real" / "x"));
}

}  // namespace worker_file_removal_test
}  // namespace convoy

// common/job_paths.h on a real file system: a job root in a temp dir with real directories
// and symlinks (issue 12: a job's paths resolve under the job root, symlinks included).
#include "common/job_paths.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace convoy {
namespace common_job_paths_test {

namespace fs = std::filesystem;

class JobPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "convoy-job-paths-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    base_ = *CanonicalPath(tmpl);
    auto root = PrepareRoot("--job-root", base_ + "/var/jobs");
    ASSERT_TRUE(root.ok()) << root.status().message();
    root_ = *root;
    job_dir_ = root_ + "/j1";
    fs::create_directories(base_ + "/datasets/fmnist");
    fs::create_directories(base_ + "/elsewhere");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }
  StatusOr<std::string> Resolve(const std::string& field, const std::string& value) {
    // As PrepareJobDirs does: the data roots count for trainer.data_dir only.
    if (field != "trainer.data_dir") return ResolveJobPath(field, value, job_dir_, root_);
    return ResolveJobPath(field, value, job_dir_, root_, {base_ + "/datasets"});
  }

  std::string base_, root_, job_dir_;
};

TEST(JobPathsPureTest, DotDotComponents) {
  for (const char* yes : {"..", "../x", "x/..", "/a/../b", "a/b/../../..", "x/../"}) {
    EXPECT_TRUE(HasDotDotComponent(yes)) << yes;
  }
  for (const char* no : {"", "/", "a..b", "..a/b..", "./x", "/a/./b", "...", "/a/b"}) {
    EXPECT_FALSE(HasDotDotComponent(no)) << no;
  }
}

TEST(JobPathsPureTest, IsPathUnder) {
  EXPECT_TRUE(IsPathUnder("/a/b", "/a/b"));
  EXPECT_TRUE(IsPathUnder("/a/b/c", "/a/b"));
  EXPECT_TRUE(IsPathUnder("/a", "/"));
  EXPECT_FALSE(IsPathUnder("/a/bc", "/a/b"));
  EXPECT_FALSE(IsPathUnder("/a", "/a/b"));
  EXPECT_FALSE(IsPathUnder("/etc", "/a/b"));
  EXPECT_FALSE(IsPathUnder("/a/b", ""));
}

TEST_F(JobPathsTest, PrepareRootCreatesSearchableDirectories) {
  struct stat st {};
  ASSERT_EQ(stat(root_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  ASSERT_EQ(stat((base_ + "/var").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  // Through a symlink: the canonical path comes back.
  fs::create_directory_symlink(base_ + "/var", base_ + "/link");
  auto again = PrepareRoot("--job-root", base_ + "/link/jobs/");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, root_);
  // A file is not a root.
  {
    FILE* f = fopen((base_ + "/file").c_str(), "w");
    fclose(f);
  }
  auto file = PrepareRoot("--job-root", base_ + "/file");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message().rfind("--job-root ", 0), 0u) << file.status().message();
}

TEST_F(JobPathsTest, RelativeMeansUnderTheJobDirectory) {
  auto p = Resolve("checkpoint_dir", "out/ckpt");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, job_dir_ + "/out/ckpt");
  p = Resolve("working_dir", "./run/");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, job_dir_ + "/run");
}

TEST_F(JobPathsTest, AbsoluteInsideTheRootIsAccepted) {
  auto p = Resolve("checkpoint_dir", root_ + "/shared/ckpt");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, root_ + "/shared/ckpt");
  p = Resolve("working_dir", root_);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, root_);
}

TEST_F(JobPathsTest, AbsoluteOutsideTheRootIsRefusedNamingTheField) {
  auto p = Resolve("checkpoint_dir", "/etc");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "checkpoint_dir: /etc is outside the job root " + root_);
  // A sibling whose name starts like the root is not under it.
  p = Resolve("working_dir", root_ + "x");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message().rfind("working_dir: ", 0), 0u);
}

TEST_F(JobPathsTest, DotDotIsRefusedBeforeAnythingIsResolved) {
  for (const std::string& value : {std::string("../../etc"), std::string("a/../../j2"),
                                   std::string(".."), root_ + "/j1/../j2"}) {
    auto p = Resolve("checkpoint_dir", value);
    ASSERT_FALSE(p.ok()) << value;
    EXPECT_EQ(p.status().message(), "checkpoint_dir: '" + value + "' must not contain '..'");
  }
}

TEST_F(JobPathsTest, SymlinkEscapingTheRootIsRefused) {
  fs::create_directories(job_dir_);
  fs::create_directory_symlink(base_ + "/elsewhere", job_dir_ + "/out");
  auto p = Resolve("checkpoint_dir", "out");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "checkpoint_dir: " + job_dir_ + "/out resolves to " + base_ +
                                      "/elsewhere, outside the job root " + root_);
  // Also below the link, and for a link to /etc given as an absolute path.
  EXPECT_FALSE(Resolve("checkpoint_dir", "out/deeper/still").ok());
  fs::create_directory_symlink("/etc", root_ + "/etc-link");
  p = Resolve("working_dir", root_ + "/etc-link");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "working_dir: " + root_ + "/etc-link resolves to /etc, outside the job root " + root_);
  // A relative symlink climbing out counts the same.
  fs::create_directory_symlink("../../../elsewhere", job_dir_ + "/rel");
  EXPECT_FALSE(Resolve("working_dir", "rel").ok());
}

TEST_F(JobPathsTest, SymlinkStayingInsideIsAccepted) {
  fs::create_directories(root_ + "/j0/ckpt");
  fs::create_directories(job_dir_);
  fs::create_directory_symlink(root_ + "/j0/ckpt", job_dir_ + "/prev");
  auto p = Resolve("checkpoint_dir", "prev");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, root_ + "/j0/ckpt");
}

TEST_F(JobPathsTest, DataDirMayAlsoNameADataRoot) {
  auto p = Resolve("trainer.data_dir", base_ + "/datasets/fmnist");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, base_ + "/datasets/fmnist");
  p = Resolve("trainer.data_dir", "mine");  // relative: the job's own copy
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, job_dir_ + "/mine");
  p = Resolve("trainer.data_dir", base_ + "/elsewhere");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "trainer.data_dir: " + base_ +
                                      "/elsewhere is outside the job root " + root_ +
                                      " and the data path " + base_ + "/datasets");
  // A symlink in the data root that leaves it is refused too.
  fs::create_directory_symlink(base_ + "/elsewhere", base_ + "/datasets/escape");
  EXPECT_FALSE(Resolve("trainer.data_dir", base_ + "/datasets/escape").ok());
  // The data roots are for data only.
  EXPECT_FALSE(Resolve("checkpoint_dir", base_ + "/datasets/fmnist").ok());
}

TEST_F(JobPathsTest, MakeJobDirsCreatesWithModeAndNeverFollowsSymlinks) {
  const std::string ckpt = job_dir_ + "/a/b";
  ASSERT_TRUE(MakeJobDirs(root_, ckpt, -1, -1, 0750).ok());
  struct stat st {};
  for (const std::string& d : {job_dir_, job_dir_ + "/a", ckpt}) {
    ASSERT_EQ(stat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_mode & 07777, 0750u) << d;
  }
  EXPECT_TRUE(MakeJobDirs(root_, ckpt, -1, -1, 0750).ok()) << "existing directories are fine";
  // A symlink on the way (even one pointing inside) is refused, and nothing is made there.
  fs::create_directory_symlink(base_ + "/elsewhere", job_dir_ + "/link");
  const Status through = MakeJobDirs(root_, job_dir_ + "/link/x", -1, -1, 0750);
  ASSERT_FALSE(through.ok());
  EXPECT_NE(through.message().find(job_dir_ + "/link: a symbolic link"), std::string::npos)
      << through.message();
  EXPECT_FALSE(fs::exists(base_ + "/elsewhere/x"));
  EXPECT_FALSE(MakeJobDirs(root_, base_ + "/elsewhere", -1, -1, 0750).ok()) << "not under root";
}

TEST_F(JobPathsTest, MakeJobDirsGivesNewDirectoriesToTheUser) {
  if (geteuid() != 0) GTEST_SKIP() << "chown to another user needs root";
  ASSERT_TRUE(fs::create_directories(job_dir_));  // exists: stays root's
  ASSERT_TRUE(MakeJobDirs(root_, job_dir_ + "/ckpt", 4321, 4322, 0750).ok());
  struct stat st {};
  ASSERT_EQ(stat((job_dir_ + "/ckpt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4321u);
  EXPECT_EQ(st.st_gid, 4322u);
  ASSERT_EQ(stat(job_dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
}

// Two workers on a shared job root prepare the same job directory at once. Neither may see the
// directory before it has its owner and mode: CI saw a rank's chdir refused because one worker
// found the directory the other had just made, still root's.
TEST_F(JobPathsTest, MakeJobDirsRacingNeverSeesADirectoryBeforeItsOwnerAndMode) {
  if (geteuid() != 0) GTEST_SKIP() << "chown to another user needs root";
  for (int round = 0; round < 50; ++round) {
    const std::string dir = root_ + "/race-" + std::to_string(round);
    std::atomic<bool> go{false};
    std::vector<std::string> seen(4);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < seen.size(); ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) {
        }
        const Status made = MakeJobDirs(root_, dir + "/checkpoints", 4321, 4322, 0700);
        if (!made.ok()) {
          seen[t] = made.message();
          return;
        }
        struct stat st {};
        if (stat(dir.c_str(), &st) != 0 || st.st_uid != 4321u || (st.st_mode & 07777) != 0700) {
          seen[t] =
              "owner " + std::to_string(st.st_uid) + " mode " + std::to_string(st.st_mode & 07777);
        }
      });
    }
    go = true;
    for (auto& th : threads) th.join();
    for (const std::string& s : seen) EXPECT_EQ(s, "") << dir;
  }
  for (const auto& e : fs::directory_iterator(root_)) {
    EXPECT_EQ(e.path().filename().string().rfind(".", 0), std::string::npos)
        << "a temporary directory was left: " << e.path();
  }
}

TEST_F(JobPathsTest, PrepareJobDirsDefaultsAndRefusals) {
  auto d = PrepareJobDirs(root_, {base_ + "/datasets"}, "j1", "", "", "", -1, -1);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->job_dir, job_dir_);
  EXPECT_EQ(d->working_dir, job_dir_);
  EXPECT_EQ(d->checkpoint_dir, job_dir_ + "/checkpoints");
  EXPECT_EQ(d->data_dir, "");
  EXPECT_TRUE(fs::is_directory(job_dir_ + "/checkpoints"));

  d = PrepareJobDirs(root_, {base_ + "/datasets"}, "j1", "ck", "w", base_ + "/datasets/fmnist", -1,
                     -1);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->checkpoint_dir, job_dir_ + "/ck");
  EXPECT_EQ(d->working_dir, job_dir_ + "/w");
  EXPECT_EQ(d->data_dir, base_ + "/datasets/fmnist");
  EXPECT_TRUE(fs::is_directory(job_dir_ + "/ck"));

  // Refused: nothing is created for the job.
  d = PrepareJobDirs(root_, {}, "j2", "/etc", "", "", -1, -1);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message().rfind("checkpoint_dir: /etc", 0), 0u);
  EXPECT_FALSE(fs::exists(root_ + "/j2"));
  d = PrepareJobDirs(root_, {}, "j2", "", "", "/usr/share", -1, -1);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message().rfind("trainer.data_dir: ", 0), 0u);
  EXPECT_FALSE(PrepareJobDirs(root_, {}, "../j", "", "", "", -1, -1).ok());
}

TEST_F(JobPathsTest, AJobWritesOnlyIntoItsOwnDirectoryOrASharedPath) {
  ASSERT_TRUE(PrepareJobDirs(root_, {}, "j1", "", "", "", -1, -1).ok());
  // Another job's directory, by absolute path, through the job root or through a link in its
  // own directory: refused naming the field, and nothing is made in either.
  for (const std::string& ck : {job_dir_ + "/checkpoints", root_ + "/j1/elsewhere", root_}) {
    auto d = PrepareJobDirs(root_, {}, "j2", ck, "", "", -1, -1);
    ASSERT_FALSE(d.ok()) << ck;
    EXPECT_NE(d.status().message().find("outside the job's own directory " + root_ + "/j2"),
              std::string::npos)
        << d.status().message();
    auto w = PrepareJobDirs(root_, {}, "j2", "", ck, "", -1, -1);
    ASSERT_FALSE(w.ok()) << ck;
    EXPECT_EQ(w.status().message().rfind("working_dir: ", 0), 0u) << w.status().message();
  }
  EXPECT_FALSE(fs::exists(root_ + "/j2"));
  EXPECT_FALSE(fs::exists(root_ + "/j1/elsewhere"));
  ASSERT_TRUE(PrepareJobDirs(root_, {}, "j3", "", "", "", -1, -1).ok());
  fs::create_directory_symlink(job_dir_, root_ + "/j3/into-j1");
  auto linked = PrepareJobDirs(root_, {}, "j3", "into-j1/x", "", "", -1, -1);
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("resolves to " + job_dir_ + "/x"), std::string::npos)
      << linked.status().message();
  // A --shared-path is allowed, and the checkpoint directory is made there.
  const std::string shared = base_ + "/team-checkpoints";
  fs::create_directories(shared);
  auto d = PrepareJobDirs(root_, {}, "j4", shared + "/run-7", "", "", -1, -1, {shared});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->checkpoint_dir, shared + "/run-7");
  EXPECT_TRUE(fs::is_directory(shared + "/run-7"));
}

TEST_F(JobPathsTest, FirstUnsearchableDir) {
  EXPECT_EQ(FirstUnsearchableDir(root_, 0, 0), "") << "root searches everything";
  chmod(base_.c_str(), 0700);
  const std::string bad = FirstUnsearchableDir(root_, 4321, 4321);
  EXPECT_EQ(bad.rfind(base_ + " (owner ", 0), 0u) << bad;
  EXPECT_NE(bad.find("mode 0700"), std::string::npos) << bad;
  chmod(base_.c_str(), 0755);
  EXPECT_EQ(FirstUnsearchableDir(root_, 4321, 4321), "");
  EXPECT_EQ(FirstUnsearchableDir(root_ + "/not-yet", 4321, 4321), "");
}

}  // namespace common_job_paths_test
}  // namespace convoy

// Identities per job (issue 27): one uid per job, kept across a worker restart, never two
// jobs on one uid, released with the job's files, reused only after the rest of the pool.
#include "worker/host/job_identity.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/support/temp_dir.h"

namespace convoy {
namespace worker_job_identity_test {

// A range no account or group of this machine uses (checked below, so a test machine with
// such an account fails loudly instead of handing it out).
constexpr UidRange kPool{2100000000, 2100000003};

TEST(UidRangeTest, ParsesAndRefusesWithTheFlagNamed) {
  auto r = ParseUidRange("--run-as-pool", "61184-65519");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->first, 61184u);
  EXPECT_EQ(r->last, 65519u);
  EXPECT_EQ(r->size(), 4336u);
  for (const char* bad : {"", "61184", "61184-", "-65519", "a-b", "65519-61184", "0-100",
                          "999-2000", "1000-4294967295", "1000 - 2000"}) {
    auto s = ParseUidRange("--run-as-pool", bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("--run-as-pool"), std::string::npos)
        << s.status().message();
  }
}

TEST(UidRangeTest, ARangeWithAnAccountInItIsRefusedNamingTheAccount) {
  EXPECT_TRUE(CheckRangeFree("--run-as-pool", kPool).ok());
  // root (uid 0) is in every database; a range around it names it.
  Status s = CheckRangeFree("--run-as-pool", UidRange{0, 10});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("account root has uid 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--run-as-pool 0-10"), std::string::npos) << s.message();
}

TEST(JobIdentitiesTest, OneUidPerJobKeptAcrossARestartAndNeverShared) {
  testing::TempDir work("job-identity");
  const std::string dir = work / "identities";
  auto ids = JobIdentities::Open(dir, kPool);
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  EXPECT_EQ(std::filesystem::status(dir).permissions(), std::filesystem::perms::owner_all);
  auto a = (*ids)->For("j-000001-aaaa", "/jobs/j-000001-aaaa");
  auto b = (*ids)->For("j-000002-bbbb", "/jobs/j-000002-bbbb");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->uid, b->uid);
  EXPECT_EQ(a->gid, a->uid);
  EXPECT_GE(a->uid, kPool.first);
  EXPECT_LE(b->uid, kPool.last);
  EXPECT_EQ(a->home, "/jobs/j-000001-aaaa");
  EXPECT_EQ(a->name, "convoy-job-" + std::to_string(a->uid));
  // The same job (another attempt) gets the same identity.
  EXPECT_EQ((*ids)->For("j-000001-aaaa", "/x")->uid, a->uid);
  // The same id of another cluster (another uid in its directory name) is another job.
  auto other_cluster = (*ids)->For("j-000001-cccc", "/jobs/j-000001-cccc");
  ASSERT_TRUE(other_cluster.ok());
  EXPECT_NE(other_cluster->uid, a->uid);
  EXPECT_NE(other_cluster->uid, b->uid);

  // A restarted worker keeps them, and hands out none of them again.
  ids->reset();
  auto again = JobIdentities::Open(dir, kPool);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Find("j-000001-aaaa"), a->uid);
  EXPECT_EQ((*again)->Find("j-000002-bbbb"), b->uid);
  auto d = (*again)->For("j-000004-dddd", "/h");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((std::set<uid_t>{a->uid, b->uid, other_cluster->uid, d->uid}).size(), 4u);
  // The pool (4 uids) is used up: the fifth job is refused with what to do.
  auto e = (*again)->For("j-000005-eeee", "/h");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--run-as-pool"), std::string::npos);
}

TEST(JobIdentitiesTest, AReleasedUidComesBackOnlyAfterTheRestOfThePool) {
  testing::TempDir work("job-identity");
  auto ids = JobIdentities::Open(work / "identities", kPool);
  ASSERT_TRUE(ids.ok());
  const uid_t first = (*ids)->For("j-1", "/h")->uid;
  EXPECT_EQ((*ids)->Release("j-1", {}), first);
  EXPECT_EQ((*ids)->Find("j-1"), std::nullopt);
  EXPECT_EQ((*ids)->Release("j-1", {}), std::nullopt);  // once
  std::set<uid_t> next;
  for (const char* job : {"j-2", "j-3", "j-4"}) next.insert((*ids)->For(job, "/h")->uid);
  EXPECT_EQ(next.count(first), 0u) << "a released uid was given out before the rest";
  EXPECT_EQ((*ids)->For("j-5", "/h")->uid, first);  // the pool wrapped around
  // Also after a restart: the next search starts where the last one ended.
  EXPECT_EQ((*ids)->Release("j-3", {}).has_value(), true);
  EXPECT_EQ((*ids)->Release("j-2", {}).has_value(), true);
  ids->reset();
  auto again = JobIdentities::Open(work / "identities", kPool);
  ASSERT_TRUE(again.ok());
  const uid_t after = (*again)->For("j-6", "/h")->uid;
  EXPECT_EQ(after, *std::min_element(next.begin(), next.end()));
}

TEST(JobIdentitiesTest, ReleaseRemovesWhatTheUidLeftInTheTemporaryDirectories) {
  if (geteuid() != 0) GTEST_SKIP() << "giving files to another uid needs root";
  testing::TempDir work("job-identity");
  testing::TempDir tmp("job-identity-tmp");
  auto ids = JobIdentities::Open(work / "identities", kPool);
  ASSERT_TRUE(ids.ok());
  const uid_t uid = (*ids)->For("j-1", "/h")->uid;
  const std::string mine = tmp / "left-by-the-job";
  const std::string tree = tmp / "a-tree";
  const std::string others = tmp / "someone-elses";
  std::ofstream(mine) << "x";
  std::filesystem::create_directories(tree + "/sub");
  std::ofstream(tree + "/sub/f") << "x";
  std::ofstream(others) << "x";
  ASSERT_EQ(chown(mine.c_str(), uid, uid), 0);
  ASSERT_EQ(chown(tree.c_str(), uid, uid), 0);
  EXPECT_EQ((*ids)->Release("j-1", {tmp.str()}), uid);
  EXPECT_FALSE(std::filesystem::exists(mine));
  EXPECT_FALSE(std::filesystem::exists(tree));
  EXPECT_TRUE(std::filesystem::exists(others));
}

TEST(JobIdentitiesTest, DamagedOrForeignRecordsAreDropped) {
  testing::TempDir work("job-identity");
  const std::string dir = work / "identities";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/" + std::to_string(kPool.first)) << "";            // empty
  std::ofstream(dir + "/" + std::to_string(kPool.first + 1)) << "j-ok\n";  // kept
  std::ofstream(dir + "/12345") << "j-outside\n";                          // outside the pool
  auto ids = JobIdentities::Open(dir, kPool);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)->Jobs(), std::vector<std::string>{"j-ok"});
  EXPECT_FALSE(std::filesystem::exists(dir + "/12345"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + std::to_string(kPool.first)));
  // The freed uid is handed out, the kept one is not.
  EXPECT_NE((*ids)->For("j-new", "/h")->uid, kPool.first + 1);
}

TEST(JobIdentitiesTest, TheCoordinatorsNumberGivesTheSameUidOnEveryWorker) {
  testing::TempDir w1("job-identity");
  testing::TempDir w2("job-identity");
  auto a = JobIdentities::Open(w1 / "identities", kPool);
  auto b = JobIdentities::Open(w2 / "identities", kPool);
  ASSERT_TRUE(a.ok() && b.ok());
  // w1 ran another job first (locally numbered): the numbered job still gets FIRST + 1 on both.
  ASSERT_TRUE((*a)->For("j-0", "/h").ok());
  auto on1 = (*a)->For("j-1", "/h", 2);
  auto on2 = (*b)->For("j-1", "/h", 2);
  ASSERT_TRUE(on1.ok()) << on1.status().message();
  ASSERT_TRUE(on2.ok()) << on2.status().message();
  EXPECT_EQ(on1->uid, kPool.first + 1);
  EXPECT_EQ(on2->uid, kPool.first + 1);
  EXPECT_EQ((*a)->For("j-1", "/h", 2)->uid, kPool.first + 1);  // its next attempt
  // A number beyond the pool, or a uid this worker still holds for a job whose files are not
  // deleted, is refused with why.
  auto beyond = (*a)->For("j-2", "/h", 5);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("beyond --run-as-pool"), std::string::npos)
      << beyond.status().message();
  const uid_t local = *(*a)->Find("j-0");
  auto held = (*a)->For("j-3", "/h", static_cast<int32_t>(local - kPool.first + 1));
  ASSERT_FALSE(held.ok());
  EXPECT_NE(held.status().message().find("still held here by job j-0"), std::string::npos)
      << held.status().message();
  // Released (its files deleted), the uid goes to the job the coordinator gave it.
  (*a)->Release("j-0", {});
  auto taken = (*a)->For("j-3", "/h", static_cast<int32_t>(local - kPool.first + 1));
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  EXPECT_EQ(taken->uid, local);
}

TEST(JobIdentitiesTest, AUidHeldForAnotherClustersJobIsNamedForTheCallerToClear) {
  testing::TempDir work("job-identity");
  const std::string dir = work / "identities";
  auto ids = JobIdentities::Open(dir, kPool);
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE((*ids)->For("j-000001-aaaa", "/h", 1, "cluster-a").ok());
  // The same cluster: still held (its files are not deleted yet).
  auto same = (*ids)->For("j-000002-bbbb", "/h", 1, "cluster-a");
  EXPECT_EQ(same.status().code(), StatusCode::kFailedPrecondition);
  // Another cluster (this worker now serves another coordinator), also after a restart.
  ids->reset();
  auto again = JobIdentities::Open(dir, kPool);
  ASSERT_TRUE(again.ok());
  auto other = (*again)->For("j-000001-cccc", "/h", 1, "cluster-b");
  ASSERT_EQ(other.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(other.status().message(), "j-000001-aaaa");
  (*again)->Release("j-000001-aaaa", {});
  EXPECT_EQ((*again)->For("j-000001-cccc", "/h", 1, "cluster-b")->uid, kPool.first);
}

}  // namespace worker_job_identity_test
}  // namespace convoy

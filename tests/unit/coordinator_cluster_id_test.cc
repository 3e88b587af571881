// The cluster's id: made once per state directory, kept across restarts, never silently
// replaced; a fresh state directory is a new cluster.
#include "coordinator/store/cluster_id.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "common/util.h"
#include "tests/support/temp_dir.h"

namespace convoy {
namespace coordinator_cluster_id_test {

TEST(ClusterIdTest, MadeOnceKeptAcrossRestartsAndNewForAFreshStateDir) {
  testing::TempDir a, b;
  bool made = false;
  auto first = LoadOrMakeClusterId(a.str(), &made);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(made);
  EXPECT_TRUE(IsHexId(*first)) << *first;
  struct stat st {};
  ASSERT_EQ(stat((a / "cluster-id").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto again = LoadOrMakeClusterId(a.str(), &made);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(made);
  EXPECT_EQ(*again, *first);

  auto other = LoadOrMakeClusterId(b.str(), &made);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(made);
  EXPECT_NE(*other, *first);
}

TEST(ClusterIdTest, ADamagedIdIsAnErrorNamingTheFileNotReplaced) {
  testing::TempDir dir;
  { std::ofstream(dir / "cluster-id") << "not-an-id\n"; }
  bool made = false;
  auto id = LoadOrMakeClusterId(dir.str(), &made);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find(dir / "cluster-id"), std::string::npos)
      << id.status().message();
  std::ifstream in(dir / "cluster-id");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "not-an-id");
}

TEST(ClusterIdTest, RandomHexIdsHaveTheirFormAndDoNotRepeat) {
  const std::string a = RandomHexId(), b = RandomHexId();
  EXPECT_TRUE(IsHexId(a)) << a;
  EXPECT_NE(a, b);
  EXPECT_FALSE(IsHexId("0123456789ABCDEF0123456789abcdef"));  // upper case
  EXPECT_FALSE(IsHexId("0123456789abcdef"));                  // 64 bits
  EXPECT_FALSE(IsHexId(""));
}

}  // namespace coordinator_cluster_id_test
}  // namespace convoy

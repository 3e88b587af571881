// coordinator/code_store: archives stored once, by a hash that was checked, 0600.
#include "coordinator/code_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "common/pki.h"
#include "tests/support/temp_dir.h"

namespace convoy {
namespace {

TEST(CodeStoreTest, ChunksInOrderAreStoredOnceUnderTheirCheckedHash) {
  testing::TempDir dir;
  auto store = CodeStore::Open((dir.path() / "code").string());
  ASSERT_TRUE(store.ok());
  const std::string data = "0123456789";
  const std::string sha = Sha256Hex(data);
  EXPECT_FALSE((*store)->Has(sha));
  auto p = (*store)->Append(sha, 10, 0, data.substr(0, 4));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->received, 4);
  EXPECT_FALSE(p->complete);
  EXPECT_FALSE((*store)->Append(sha, 10, 7, "789").ok());  // a gap
  p = (*store)->Append(sha, 10, 4, data.substr(4));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->complete);
  EXPECT_TRUE((*store)->Has(sha));
  struct stat st {};
  ASSERT_EQ(stat((dir.path() / "code" / (sha + ".tar.gz")).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir.path() / "code").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Again: complete at once, nothing written.
  p = (*store)->Append(sha, 10, 0, "");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->complete);
  int64_t total = 0;
  auto back = (*store)->Read(sha, 3, 4, &total);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "3456");
  EXPECT_EQ(total, 10);
  EXPECT_EQ((*store)->Read(std::string(64, 'a'), 0, 4, &total).status().code(),
            StatusCode::kNotFound);
}

TEST(CodeStoreTest, BytesThatDoNotHashToTheNameAreRefused) {
  testing::TempDir dir;
  auto store = CodeStore::Open((dir.path() / "code").string());
  ASSERT_TRUE(store.ok());
  const std::string sha = Sha256Hex("the real bytes");
  auto p = (*store)->Append(sha, 5, 0, "other");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("do not hash"), std::string::npos);
  EXPECT_FALSE((*store)->Has(sha));
  EXPECT_FALSE((*store)->Append("../../etc", 5, 0, "x").ok());
  EXPECT_FALSE((*store)->Append(sha, int64_t{200} << 20, 0, "x").ok());  // over 100 MB
}

}  // namespace
}  // namespace convoy

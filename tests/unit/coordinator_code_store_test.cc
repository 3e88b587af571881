// coordinator/code_store: archives stored once, by a hash that was checked, 0600.
#include "coordinator/store/code_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <vector>

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
  auto p = (*store)->Append(sha, 10, 0, data.substr(0, 4), "alice");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->received, 4);
  EXPECT_FALSE(p->complete);
  EXPECT_FALSE((*store)->Append(sha, 10, 7, "789", "alice").ok());  // a gap
  p = (*store)->Append(sha, 10, 4, data.substr(4), "alice");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->complete);
  EXPECT_TRUE((*store)->Has(sha));
  struct stat st {};
  ASSERT_EQ(stat((dir.path() / "code" / (sha + ".tar.gz")).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir.path() / "code").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE((*store)->OwnedBy(sha, "alice"));
  // Again: complete at once, nothing written.
  p = (*store)->Append(sha, 10, 0, "", "alice");
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
  auto p = (*store)->Append(sha, 5, 0, "other", "alice");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("do not hash"), std::string::npos);
  EXPECT_FALSE((*store)->Has(sha));
  EXPECT_FALSE((*store)->Append("../../etc", 5, 0, "x", "alice").ok());
  EXPECT_FALSE((*store)->Append(sha, int64_t{200} << 20, 0, "x", "alice").ok());  // over 100 MB
}

// Issue 28: a job names only code its owner uploaded. Knowing the hash is not enough: anyone
// but an owner sends the bytes again (checked against the hash) before it is theirs too, and
// no upload writes into another uploader's unfinished one.
TEST(CodeStoreTest, AnArchiveIsItsUploadersAndAnotherUserMustProveTheBytes) {
  testing::TempDir dir;
  auto store = CodeStore::Open((dir.path() / "code").string());
  ASSERT_TRUE(store.ok());
  const std::string data = "alice's code";
  const std::string sha = Sha256Hex(data);
  const int64_t n = static_cast<int64_t>(data.size());
  // Bob starts an upload of the hash before alice finishes hers: his bytes never mix in.
  ASSERT_TRUE((*store)->Append(sha, n, 0, "garbage", "bob").ok());
  ASSERT_TRUE((*store)->Append(sha, n, 0, data.substr(0, 5), "alice").ok());
  auto p = (*store)->Append(sha, n, 5, data.substr(5), "alice");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->complete);
  EXPECT_TRUE((*store)->OwnedBy(sha, "alice"));
  EXPECT_FALSE((*store)->OwnedBy(sha, "bob"));
  // Bob names it without the bytes: not complete, not his.
  p = (*store)->Append(sha, n, 0, "", "bob");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->complete);
  EXPECT_FALSE((*store)->OwnedBy(sha, "bob"));
  // Wrong bytes: refused; alice's archive is untouched.
  EXPECT_FALSE((*store)->Append(sha, n, 0, std::string(data.size(), 'x'), "bob").ok());
  EXPECT_FALSE((*store)->OwnedBy(sha, "bob"));
  int64_t total = 0;
  auto back = (*store)->Read(sha, 0, 100, &total);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, data);
  // The same bytes: his too.
  p = (*store)->Append(sha, n, 0, data, "bob");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->complete);
  EXPECT_TRUE((*store)->OwnedBy(sha, "bob"));
  EXPECT_TRUE((*store)->OwnedBy(sha, "alice"));
  EXPECT_FALSE((*store)->OwnedBy(sha, "carol"));
  // Nothing of the uploads in progress is left.
  for (const auto& e : std::filesystem::directory_iterator(dir.path() / "code")) {
    EXPECT_NE(e.path().extension(), ".part") << e.path();
  }
}

// Issue 28: archives no kept job names are collected once their grace is over; a named one,
// or one stored within the grace, stays; abandoned uploads go at the next start.
TEST(CodeStoreTest, ArchivesNoJobNamesAreCollectedAndPartsGoAtStart) {
  testing::TempDir dir;
  const std::string code = (dir.path() / "code").string();
  auto store = CodeStore::Open(code);
  ASSERT_TRUE(store.ok());
  auto put = [&](const std::string& data) {
    const std::string sha = Sha256Hex(data);
    auto p = (*store)->Append(sha, static_cast<int64_t>(data.size()), 0, data, "alice");
    EXPECT_TRUE(p.ok() && p->complete);
    return sha;
  };
  const std::string named = put("named by a job");
  const std::string orphan = put("named by nothing");
  const std::string fresh = put("just uploaded");
  // An upload that never finished.
  const std::string partial = Sha256Hex("never finished");
  ASSERT_TRUE((*store)->Append(partial, 100, 0, "never", "alice").ok());
  auto age = [&](const std::string& sha) {
    const auto p = std::filesystem::path(code) / (sha + ".tar.gz");
    std::filesystem::last_write_time(
        p, std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  };
  age(named);
  age(orphan);
  const auto removed = (*store)->Collect({named}, 3600);
  EXPECT_EQ(removed, std::vector<std::string>{orphan});
  EXPECT_TRUE((*store)->Has(named));
  EXPECT_TRUE((*store)->OwnedBy(named, "alice"));
  EXPECT_FALSE((*store)->Has(orphan));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(code) / (orphan + ".owners")));
  EXPECT_TRUE((*store)->Has(fresh));  // within its grace
  // Uploading it again starts the grace anew.
  age(fresh);
  put("just uploaded");
  EXPECT_TRUE((*store)->Collect({named}, 3600).empty());
  EXPECT_TRUE((*store)->Has(fresh));

  auto parts = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(code)) {
      n += e.path().extension() == ".part";
    }
    return n;
  };
  EXPECT_EQ(parts(), 1);  // within its grace
  store->reset();
  store = CodeStore::Open(code);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(parts(), 0);
  EXPECT_TRUE((*store)->Has(fresh));
}

}  // namespace
}  // namespace convoy

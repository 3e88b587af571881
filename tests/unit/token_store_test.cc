#include "coordinator/store/token_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "tests/support/temp_dir.h"

namespace convoy {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;
constexpr int64_t kHour = 3'600'000;

class TokenStoreTest : public ::testing::Test {
 protected:
  std::string Db() { return dir_ / "convoy.db"; }
  std::unique_ptr<TokenStore> Open() {
    auto s = TokenStore::Open(Db());
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }
  testing::TempDir dir_;
};

TEST_F(TokenStoreTest, ATokenChecksAndOnlyItsSaltedHashIsStored) {
  auto store = Open();
  TokenRecord made;
  auto token = store->Create("alice", Role::kUser, 0, 0, kNow, &made);
  ASSERT_TRUE(token.ok());
  std::string id, secret;
  ASSERT_TRUE(SplitToken(*token, &id, &secret));
  EXPECT_EQ(id, made.id);
  auto rec = store->Check(*token, kNow + 1, false);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_EQ(rec->user, "alice");
  EXPECT_EQ(rec->role, Role::kUser);

  // The secret is nowhere in the file.
  store.reset();
  FILE* f = std::fopen(Db().c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::string bytes;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  std::fclose(f);
  EXPECT_EQ(bytes.find(secret), std::string::npos);
  EXPECT_NE(bytes.find("alice"), std::string::npos);
}

TEST_F(TokenStoreTest, BadTokensAreUnauthenticatedSayingWhy) {
  auto store = Open();
  auto token = *store->Create("alice", Role::kAdmin, kHour, 0, kNow);
  std::string wrong = token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  struct Case {
    std::string token;
    int64_t now;
    std::string why;
  } cases[] = {
      {"", kNow, "malformed"},
      {"Bearer xyz", kNow, "malformed"},
      {"cvy_0123456789abcdef." + std::string(64, 'a'), kNow, "unknown"},
      {wrong, kNow, "wrong secret"},
      {token, kNow + kHour, "expired"},
  };
  for (const Case& c : cases) {
    auto r = store->Check(c.token, c.now, false);
    ASSERT_FALSE(r.ok()) << c.token;
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
    EXPECT_NE(r.status().message().find(c.why), std::string::npos) << r.status().message();
  }
}

TEST_F(TokenStoreTest, RevocationFromAnotherConnectionTakesEffectOnTheNextCall) {
  auto coordinator = Open();
  auto token = *coordinator->Create("bob", Role::kViewer, 0, 0, kNow);
  ASSERT_TRUE(coordinator->Check(token, kNow, false).ok());
  {
    auto cli = Open();  // `convoy-coordinator token revoke bob`
    auto n = cli->Revoke("bob");
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 1);
    EXPECT_EQ(cli->Revoke("bob").status().code(), StatusCode::kNotFound);
  }
  auto r = coordinator->Check(token, kNow + 1, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("revoked"), std::string::npos);
}

TEST_F(TokenStoreTest, JoinTokensAreUsedUp) {
  auto store = Open();
  auto token = *store->Create("join", Role::kWorker, kHour, 2, kNow);
  EXPECT_TRUE(store->Check(token, kNow, true).ok());
  EXPECT_TRUE(store->Check(token, kNow, false).ok());  // checking is not using
  EXPECT_TRUE(store->Check(token, kNow, true).ok());
  auto r = store->Check(token, kNow, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("used up"), std::string::npos);
  // Persisted: a restarted coordinator agrees.
  store.reset();
  EXPECT_FALSE(Open()->Check(token, kNow, false).ok());
}

TEST_F(TokenStoreTest, ListShowsUsersRolesAndLastUseNewestFirst) {
  auto store = Open();
  auto a = *store->Create("alice", Role::kAdmin, 0, 0, kNow);
  store->Create("bob", Role::kViewer, 0, 0, kNow + 5).ok();
  ASSERT_TRUE(store->Check(a, kNow + 100, false).ok());
  store->Flush();
  auto list = Open()->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].user, "bob");
  EXPECT_EQ((*list)[1].user, "alice");
  EXPECT_EQ((*list)[1].role, Role::kAdmin);
  EXPECT_EQ((*list)[1].last_used_ms, kNow + 100);
  EXPECT_EQ((*list)[0].last_used_ms, 0);
}

}  // namespace
}  // namespace convoy

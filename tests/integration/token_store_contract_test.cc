// The token store on both backends (issue 30: tokens must survive the loss of a coordinator):
// SQLite on a real file, and etcd on a real etcd member started by the test. Each "Open" is
// another connection: the `token` command, a restarted coordinator, or another coordinator
// of an etcd group.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "coordinator/store/etcd_token_backend.h"
#include "coordinator/store/token_store.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/temp_dir.h"

namespace convoy {
namespace token_store_contract_test {

constexpr int64_t kNow = 1'800'000'000'000;
constexpr int64_t kHour = 3'600'000;

// How often a coordinator reads the tokens again (production: every second; on SQLite also
// whenever the file is written).
constexpr int64_t kPollMs = 50;

class TokenStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (etcd() && !testing::EtcdCluster::Available())
      GTEST_SKIP() << "etcd is not installed (etcd-server)";
  }
  bool etcd() const { return GetParam() == "etcd"; }
  std::string Db() { return dir_ / "convoy.db"; }

  std::unique_ptr<TokenStore> Open(int64_t poll_ms = kPollMs) {
    StatusOr<std::unique_ptr<TokenStore>> s = Status::Ok();
    if (etcd()) {
      EtcdOptions options;
      options.endpoints = testing::SharedEtcd().endpoints();
      auto client = EtcdClient::Create(options);
      EXPECT_TRUE(client.ok()) << client.status().message();
      clients_.push_back(std::move(*client));
      s = TokenStore::Open(MakeEtcdTokenBackend(*clients_.back(), prefix_, poll_ms));
    } else {
      s = TokenStore::Open(Db(), poll_ms);
    }
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // Every byte the backend keeps: the SQLite file, or every key and value under the prefix.
  std::string StoredBytes() {
    std::string bytes;
    if (etcd()) {
      EtcdOptions options;
      options.endpoints = testing::SharedEtcd().endpoints();
      auto client = EtcdClient::Create(options);
      auto kvs = (*client)->GetPrefix(prefix_);
      EXPECT_TRUE(kvs.ok());
      for (const auto& kv : *kvs) bytes += kv.key() + "=" + kv.value() + "\n";
      return bytes;
    }
    FILE* f = std::fopen(Db().c_str(), "rb");
    EXPECT_NE(f, nullptr);
    if (f == nullptr) return bytes;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
    std::fclose(f);
    return bytes;
  }

  testing::TempDir dir_;
  const std::string prefix_ = testing::UniqueEtcdPrefix() + "convoy/";
  std::vector<std::unique_ptr<EtcdClient>> clients_;  // outlive the stores of a test
};

TEST_P(TokenStoreTest, ATokenChecksAndOnlyItsSaltedHashIsStored) {
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

  // The secret is nowhere in the store.
  store.reset();
  const std::string bytes = StoredBytes();
  EXPECT_EQ(bytes.find(secret), std::string::npos);
  EXPECT_NE(bytes.find("alice"), std::string::npos);
}

TEST_P(TokenStoreTest, BadTokensAreUnauthenticatedSayingWhy) {
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

// Within the coordinator's poll (every second in production); on SQLite as soon as the file
// is written (below).
TEST_P(TokenStoreTest, RevocationFromAnotherConnectionTakesEffect) {
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
  for (int i = 0; r.ok() && i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
    r = coordinator->Check(token, kNow + 1, false);
  }
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("revoked"), std::string::npos);
  std::string id, secret;
  ASSERT_TRUE(SplitToken(token, &id, &secret));
  EXPECT_FALSE(coordinator->StillValid(id, kNow + 1));
}

// Issue 44: checks are answered from memory, and on SQLite the table is read again as soon
// as another connection writes the file (`convoy-coordinator token revoke` in another
// process): with a poll far away, the revocation still takes effect within moments.
TEST_P(TokenStoreTest, OnSqliteARevocationIsSeenWhenTheFileIsWritten) {
  if (etcd()) GTEST_SKIP() << "etcd is polled";
  auto coordinator = Open(/*poll_ms=*/3'600'000);
  auto token = *coordinator->Create("bob", Role::kViewer, 0, 0, kNow);
  ASSERT_TRUE(coordinator->Check(token, kNow, false).ok());
  ASSERT_TRUE(Open()->Revoke("bob").ok());
  auto r = coordinator->Check(token, kNow + 1, false);
  for (int i = 0; r.ok() && i < 1000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = coordinator->Check(token, kNow + 1, false);
  }
  ASSERT_FALSE(r.ok()) << "a revocation in the file was never read";
  EXPECT_NE(r.status().message().find("revoked"), std::string::npos);
}

// A limited join token's last use goes to one caller only, however many coordinators (or
// threads) try at once.
TEST_P(TokenStoreTest, TheLastUseOfAJoinTokenIsTakenOnce) {
  auto a = Open();
  auto b = Open();
  auto token = *a->Create("join", Role::kWorker, kHour, 3, kNow);
  ASSERT_TRUE(b->Check(token, kNow, false).ok() || etcd());  // b may not have read it yet
  std::atomic<int> joined{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    TokenStore* store = t % 2 == 0 ? a.get() : b.get();
    threads.emplace_back([&, store] {
      for (int i = 0; i < 200; ++i) {
        auto r = store->Check(token, kNow, true);
        if (r.ok()) {
          ++joined;
          return;
        }
        if (r.status().message().find("used up") != std::string::npos) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // b not loaded yet
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(joined.load(), 3);
  auto r = Open()->Check(token, kNow, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("used up"), std::string::npos);
}

// Which worker names hold a certificate of the cluster CA (a Join for a held name is refused).
TEST_P(TokenStoreTest, CertificateRecordsAreSharedAndForgotten) {
  auto a = Open();
  ASSERT_TRUE(a->RecordCertificate("w1", 1'900'000'000).ok());
  ASSERT_TRUE(a->RecordCertificate("w1", 1'900'000'100).ok());  // renewed
  auto b = Open();
  auto at = b->CertificateNotAfter("w1");
  ASSERT_TRUE(at.ok()) << at.status().message();
  EXPECT_EQ(*at, 1'900'000'100);
  EXPECT_EQ(*b->CertificateNotAfter("w2"), 0);
  EXPECT_TRUE(*b->ForgetCertificate("w1"));
  EXPECT_FALSE(*a->ForgetCertificate("w1"));
  EXPECT_EQ(*a->CertificateNotAfter("w1"), 0);
}

TEST_P(TokenStoreTest, JoinTokensAreUsedUp) {
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

TEST_P(TokenStoreTest, ListShowsUsersRolesAndLastUseNewestFirst) {
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

INSTANTIATE_TEST_SUITE_P(BothStores, TokenStoreTest, ::testing::Values("sqlite", "etcd"),
                         [](const auto& info) { return info.param; });

}  // namespace token_store_contract_test
}  // namespace convoy

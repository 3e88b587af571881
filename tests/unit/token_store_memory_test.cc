// Issue 44: TokenStore answers Check and StillValid from memory: an authenticated call asks
// its backend nothing; only an id it has never seen makes it read the backend again, at most
// every 200 ms however many unknown tokens come.
#include <gtest/gtest.h>

#include <functional>

#include "coordinator/store/token_store.h"
#include "tests/support/memory_token_backend.h"

namespace convoy {
namespace token_store_memory_test {

constexpr int64_t kNow = 1'800'000'000'000;

TEST(TokenStoreMemoryTest, ChecksAreAnsweredFromMemory) {
  auto backend = std::make_unique<MemoryTokenBackend>();
  MemoryTokenBackend* counted = backend.get();
  auto store = TokenStore::Open(std::move(backend));
  ASSERT_TRUE(store.ok());
  auto token = (*store)->Create("alice", Role::kUser, 0, 0, kNow);
  ASSERT_TRUE(token.ok());
  std::string id, secret;
  ASSERT_TRUE(SplitToken(*token, &id, &secret));
  const int before = counted->asked();
  for (int i = 0; i < 100; ++i) {
    auto r = (*store)->Check(*token, kNow + i, false);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE((*store)->StillValid(id, kNow + i));
  }
  EXPECT_EQ(counted->asked(), before) << "an authenticated call asked the backend";
}

TEST(TokenStoreMemoryTest, AnUnknownIdReadsTheBackendAtMostEvery200Ms) {
  auto backend = std::make_unique<MemoryTokenBackend>();
  MemoryTokenBackend* counted = backend.get();
  auto store = TokenStore::Open(std::move(backend));
  ASSERT_TRUE(store.ok());
  const int before = counted->asked();
  const std::string unknown = "cvy_0123456789abcdef." + std::string(64, 'a');
  for (int i = 0; i < 50; ++i) {
    auto r = (*store)->Check(unknown, kNow, false);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("unknown token"), std::string::npos);
  }
  // A read for the first miss, and not one per miss after it (50 refusals take far less
  // than 200 ms; the bound leaves room for a slow machine).
  EXPECT_GE(counted->asked() - before, 1);
  EXPECT_LT(counted->asked() - before, 10);
}

// A join token of two uses, taken by two workers joining at once, while the table is read
// again between the first take and its note in memory (the poller sees the backend written by
// that take, or a miss reads it): the memory must not count the first use twice, or the
// second worker is refused as "used up" with a use left (the README's two workers, found by
// CI: one of them never joined).
class ReloadingOnTake : public MemoryTokenBackend {
 public:
  std::function<void()> after_take;
  StatusOr<bool> TakeUse(const std::string& id) override {
    auto taken = MemoryTokenBackend::TakeUse(id);
    if (after_take) after_take();
    return taken;
  }
};

TEST(TokenStoreMemoryTest, AReadBetweenATakeAndItsNoteDoesNotCountTheUseTwice) {
  auto backend = std::make_unique<ReloadingOnTake>();
  ReloadingOnTake* hooked = backend.get();
  auto store = TokenStore::Open(std::move(backend));
  ASSERT_TRUE(store.ok());
  auto token = (*store)->Create("", Role::kWorker, 0, 2, kNow);
  ASSERT_TRUE(token.ok());
  // Made after Open, so the store reads the backend at its first miss: this unknown token.
  const std::string unknown = "cvy_0123456789abcdef." + std::string(64, 'a');
  int reloads = 0;
  hooked->after_take = [&] {
    if (reloads++ == 0) {
      EXPECT_FALSE((*store)->Check(unknown, kNow, false).ok());
    }
  };
  auto first = (*store)->Check(*token, kNow, true);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = (*store)->Check(*token, kNow, true);
  ASSERT_TRUE(second.ok()) << second.status().message();
  auto third = (*store)->Check(*token, kNow, true);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find("is used up"), std::string::npos);
}

}  // namespace token_store_memory_test
}  // namespace convoy

// The worker stream table: a newer stream of a name replaces the older one (the caller
// closes it), the older one's end is no news about the worker, and a lost worker's stream
// is dropped for it to register again.
#include "coordinator/control/worker_streams.h"

#include <gtest/gtest.h>

#include "tests/support/fake_worker_stream.h"

namespace convoy {
namespace coordinator_worker_streams_test {

TEST(WorkerStreamTableTest, ANewerStreamReplacesTheOlderOne) {
  WorkerStreamTable table;
  auto first = std::make_shared<FakeStream>();
  auto second = std::make_shared<FakeStream>();
  EXPECT_EQ(table.Bind("w1", first), nullptr);
  EXPECT_EQ(table.Bind("w1", first), nullptr) << "the same stream again replaces nothing";
  EXPECT_EQ(table.Bind("w1", second), first);
  EXPECT_EQ(table.Find("w1"), second);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_TRUE(table.Connected("w1"));
  EXPECT_FALSE(table.Connected("w2"));
  EXPECT_EQ(table.Find("w2"), nullptr);
}

TEST(WorkerStreamTableTest, AnOlderStreamsEndLeavesTheNewerOne) {
  WorkerStreamTable table;
  auto first = std::make_shared<FakeStream>();
  auto second = std::make_shared<FakeStream>();
  table.Bind("w1", first);
  table.Bind("w1", second);
  EXPECT_FALSE(table.Unbind("w1", first.get()));
  EXPECT_TRUE(table.Connected("w1"));
  EXPECT_FALSE(table.Unbind("w2", second.get()));
  EXPECT_TRUE(table.Unbind("w1", second.get()));
  EXPECT_FALSE(table.Connected("w1"));
  EXPECT_EQ(table.size(), 0u);
}

TEST(WorkerStreamTableTest, DropAndTakeAllHandTheStreamsBackToClose) {
  WorkerStreamTable table;
  auto a = std::make_shared<FakeStream>();
  auto b = std::make_shared<FakeStream>();
  table.Bind("w1", a);
  table.Bind("w2", b);
  EXPECT_EQ(table.Drop("w1"), a);
  EXPECT_EQ(table.Drop("w1"), nullptr);
  EXPECT_FALSE(table.Connected("w1"));
  auto all = table.TakeAll();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all["w2"], b);
  EXPECT_EQ(table.size(), 0u);
  // The table never closes a stream itself: that is the caller's, outside the state lock.
  EXPECT_EQ(a->close_reason(), "");
  EXPECT_EQ(b->close_reason(), "");
}

}  // namespace coordinator_worker_streams_test
}  // namespace convoy

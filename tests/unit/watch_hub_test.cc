#include "coordinator/control/watch_hub.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace convoy {
namespace watch_hub_test {

v1::WatchJobResponse Snapshot(const std::string& id, v1::JobState state) {
  v1::WatchJobResponse u;
  u.mutable_job()->set_id(id);
  u.mutable_job()->set_state(state);
  return u;
}

struct Seen {
  std::vector<std::string> updates;  // "<job>:<state>" or "<job>:<state>:done"
  WatchHub::WatchFn Fn() {
    return [this](const v1::WatchJobResponse& u, bool done) {
      updates.push_back(u.job().id() + ":" + v1::JobState_Name(u.job().state()) +
                        (done ? ":done" : ""));
    };
  }
};

TEST(WatchHubTest, UpdatesReachOnlyTheWatchersOfTheirJob) {
  WatchHub hub;
  Seen a, b;
  hub.Add("j-1", a.Fn());
  hub.Add("j-2", b.Fn());
  hub.Notify("j-1", Snapshot("j-1", v1::RUNNING));
  hub.Notify("j-3", Snapshot("j-3", v1::RUNNING));  // nobody watches it
  EXPECT_EQ(a.updates, std::vector<std::string>{"j-1:RUNNING"});
  EXPECT_TRUE(b.updates.empty());
}

TEST(WatchHubTest, CloseDeliversTheFinalUpdateOnceAndForgetsTheWatchers) {
  WatchHub hub;
  Seen a, b;
  const uint64_t wa = hub.Add("j-1", a.Fn());
  hub.Add("j-1", b.Fn());
  EXPECT_EQ(hub.watchers_of("j-1"), 2u);
  hub.Close("j-1", Snapshot("j-1", v1::SUCCEEDED));
  EXPECT_EQ(a.updates, std::vector<std::string>{"j-1:SUCCEEDED:done"});
  EXPECT_EQ(b.updates, std::vector<std::string>{"j-1:SUCCEEDED:done"});
  EXPECT_EQ(hub.watches(), 0u);
  // Nothing reaches a closed watch, and removing it later is harmless.
  hub.Notify("j-1", Snapshot("j-1", v1::SUCCEEDED));
  hub.Remove(wa);
  EXPECT_EQ(a.updates.size(), 1u);
}

TEST(WatchHubTest, ARemovedWatchGetsNothingMoreAndOthersStay) {
  WatchHub hub;
  Seen a, b;
  const uint64_t wa = hub.Add("j-1", a.Fn());
  const uint64_t wb = hub.Add("j-1", b.Fn());
  EXPECT_NE(wa, wb);
  hub.Remove(wa);
  hub.Notify("j-1", Snapshot("j-1", v1::RUNNING));
  EXPECT_TRUE(a.updates.empty());
  EXPECT_EQ(b.updates, std::vector<std::string>{"j-1:RUNNING"});
  EXPECT_EQ(hub.watches(), 1u);
}

TEST(WatchHubTest, IdsAreNeverReusedEvenForWatchesNotKept) {
  WatchHub hub;
  Seen a;
  const uint64_t first = hub.Add("j-1", a.Fn());
  const uint64_t unkept = hub.NextId();
  hub.Remove(first);
  const uint64_t second = hub.Add("j-1", a.Fn());
  EXPECT_NE(first, 0u);
  EXPECT_LT(first, unkept);
  EXPECT_LT(unkept, second);
  // Removing the id of a watch never kept touches no other.
  hub.Remove(unkept);
  EXPECT_EQ(hub.watchers_of("j-1"), 1u);
}

TEST(WatchHubTest, AWatcherThatUnsubscribesWhileBeingClosedIsSafe) {
  WatchHub hub;
  uint64_t self = 0;
  int calls = 0;
  self = hub.Add("j-1", [&](const v1::WatchJobResponse&, bool) {
    ++calls;
    hub.Remove(self);
  });
  hub.Close("j-1", Snapshot("j-1", v1::FAILED));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(hub.watches(), 0u);
}

}  // namespace watch_hub_test
}  // namespace convoy

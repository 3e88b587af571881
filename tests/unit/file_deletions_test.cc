// The removal of deleted jobs' files (FileDeletions), the identity pool and retention: the
// JobManager's cleanup controllers on their own.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "coordinator/control/file_deletions.h"
#include "coordinator/control/retention.h"
#include "coordinator/state/identity_pool.h"
#include "tests/support/memory_job_store.h"

namespace convoy {
namespace file_deletions_test {

class Channel : public WorkerChannel {
 public:
  bool Send(const std::string& name, const v1::CoordinatorMessage& msg) override {
    if (connected.count(name) == 0) return false;
    sent.push_back(name + ":" + msg.delete_job_files().job_id() + ":" +
                   msg.delete_job_files().job_uid() + ":" + msg.delete_job_files().cluster_id());
    return true;
  }
  std::set<std::string> connected;
  std::vector<std::string> sent;
};

v1::JobFilesDeleted Answer(const std::string& id, const std::string& error = "") {
  v1::JobFilesDeleted m;
  m.set_job_id(id);
  m.set_error(error);
  return m;
}

TEST(FileDeletionsTest, ARemovalIsPersistedSentAndDoneOnlyWhenItsWorkerAnswersWithoutError) {
  FakeClock clock;
  MemoryJobStore store;
  Channel channel;
  channel.connected = {"w1"};
  FileDeletions d(clock, store, channel, "c-1");
  d.Request({"w1", "w2"}, "j-1", "u1");
  EXPECT_EQ(channel.sent, std::vector<std::string>{"w1:j-1:u1:c-1"});  // w2 is not connected
  EXPECT_EQ(store.LoadFileDeletions()->size(), 2u);
  EXPECT_TRUE(d.HoldsFilesOf("u1"));

  // An error (a rank of the job still runs there): asked again after kRetryMs, not before.
  EXPECT_FALSE(d.OnAnswer("w1", Answer("j-1", "busy")).has_value());
  channel.sent.clear();
  clock.AdvanceMs(FileDeletions::kRetryMs - 1);
  d.Tick();
  EXPECT_TRUE(channel.sent.empty());
  clock.AdvanceMs(1000);
  d.Tick();
  EXPECT_EQ(channel.sent, std::vector<std::string>{"w1:j-1:u1:c-1"});

  // w2 registers: it is sent everything it owes.
  channel.connected.insert("w2");
  channel.sent.clear();
  d.SendTo("w2", /*all=*/true);
  EXPECT_EQ(channel.sent, std::vector<std::string>{"w2:j-1:u1:c-1"});

  EXPECT_EQ(d.OnAnswer("w1", Answer("j-1")), std::optional<std::string>("u1"));
  EXPECT_TRUE(d.HoldsFilesOf("u1"));                          // w2 has not answered
  EXPECT_FALSE(d.OnAnswer("w3", Answer("j-1")).has_value());  // never asked
  EXPECT_EQ(d.OnAnswer("w2", Answer("j-1")), std::optional<std::string>("u1"));
  EXPECT_FALSE(d.HoldsFilesOf("u1"));
  EXPECT_TRUE(d.List().empty());
  EXPECT_TRUE(store.LoadFileDeletions()->empty());
}

TEST(FileDeletionsTest, RestoredRemovalsAreSentAtRegistrationAndAForgottenWorkerOwesNothing) {
  FakeClock clock;
  MemoryJobStore store;
  Channel channel;
  FileDeletions d(clock, store, channel, "c-1");
  d.Restore({{"w1", "j-1", "u1"}, {"w1", "j-2", "u2"}, {"w2", "j-1", "u1"}});
  channel.connected = {"w1"};
  d.SendTo("w1", /*all=*/true);
  EXPECT_EQ(channel.sent, (std::vector<std::string>{"w1:j-1:u1:c-1", "w1:j-2:u2:c-1"}));
  const std::vector<FileDeletion> dropped = d.Forget("w1");
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[1].job_uid, "u2");
  EXPECT_FALSE(d.HoldsFilesOf("u2"));
  EXPECT_TRUE(d.HoldsFilesOf("u1"));  // still on w2
  EXPECT_EQ(d.List().size(), 1u);
}

TEST(IdentityPoolTest, EachJobGetsTheLowestFreeIdentityAndOneIsFreeOnlyWhenReleased) {
  IdentityPool pool;
  EXPECT_EQ(pool.Take("a"), 1);
  EXPECT_EQ(pool.Take("b"), 2);
  pool.Hold(4, "d");  // recovered
  EXPECT_EQ(pool.Take("c"), 3);
  EXPECT_EQ(pool.Take("e"), 5);
  pool.Release("b");
  pool.Release("nobody");
  EXPECT_EQ(pool.held(), 4u);
  EXPECT_EQ(pool.Take("f"), 2);
}

class RetentionTest : public ::testing::Test {
 protected:
  void Finished(const std::string& id, int64_t ended_unix_ms, bool released = true) {
    v1::Job j;
    j.set_id(id);
    j.set_state(v1::SUCCEEDED);
    j.add_events()->set_time_unix_ms(ended_unix_ms);
    JobRecord& r = table_.Insert(std::move(j), AttemptRuntime(FailureAttribution(clock_, 1)));
    r.rt.attempt = 0;
    r.rt.released = released;
  }
  FakeClock clock_;
  JobTable table_{clock_};
};

TEST_F(RetentionTest, OldAndSurplusFinishedJobsAreDueOldestFirstOncePerInterval) {
  const int64_t now = clock_.NowUnixMs();
  Finished("j-1", now - 5000);
  Finished("j-2", now - 9000);  // ended first
  Finished("j-3", now - 1000);
  Finished("j-4", now - 8000, /*released=*/false);  // its ranks are being stopped
  v1::Job running;
  running.set_id("j-5");
  running.set_state(v1::RUNNING);
  table_.Insert(running, AttemptRuntime(FailureAttribution(clock_, 1)));
  Retention by_age(clock_, /*max_age_ms=*/4000, /*max_count=*/0);
  EXPECT_EQ(by_age.Due(table_), (std::vector<std::string>{"j-2", "j-1"}));
  EXPECT_TRUE(by_age.Due(table_).empty());  // the next look is an interval away
  clock_.AdvanceMs(Retention::kIntervalMs);
  EXPECT_EQ(by_age.Due(table_).size(), 3u);  // j-3 is old now too
  Retention by_count(clock_, 0, /*max_count=*/2);
  EXPECT_EQ(by_count.Due(table_), (std::vector<std::string>{"j-2"}));  // j-4: not stopped
  Retention none(clock_, 0, 0);
  EXPECT_TRUE(none.Due(table_).empty());
}

TEST_F(RetentionTest, ABacklogIsTakenInBatches) {
  const int64_t now = clock_.NowUnixMs();
  for (size_t i = 0; i < Retention::kBatch + 3; ++i) {
    Finished("j-" + std::to_string(i + 1), now - 100000 + static_cast<int64_t>(i));
  }
  Retention r(clock_, 1000, 0);
  EXPECT_EQ(r.Due(table_).size(), Retention::kBatch);
  r.LookAgainSoon();
  EXPECT_EQ(r.Due(table_).size(), Retention::kBatch);  // the caller deleted none here
}

}  // namespace file_deletions_test
}  // namespace convoy

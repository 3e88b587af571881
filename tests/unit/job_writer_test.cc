// The JobWriter on its own: a transition is durable before memory, the indexes, the
// statistics and the watchers change; a failed write changes nothing.
#include "coordinator/control/job_writer.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/job_manager_fixture.h"

namespace convoy {
namespace job_writer_test {

class JobWriterTest : public ::testing::Test {
 protected:
  JobRecord& Job() {
    v1::Job job;
    job.set_id(table_.NextId());
    job.set_state(v1::PENDING);
    job.set_owner("alice");
    return table_.Insert(std::move(job), AttemptRuntime(FailureAttribution(clock_, 100)));
  }
  FakeClock clock_;
  CountingStore store_;
  JobTable table_{clock_};
  WatchHub watches_;
  JobStats stats_{clock_};
  std::vector<std::pair<v1::JobState, v1::JobState>> hooked_;
  JobWriter writer_{
      clock_,
      store_,
      table_,
      watches_,
      stats_,
      2000,
      [this](JobRecord&, v1::JobState from, v1::JobState to) { hooked_.emplace_back(from, to); }};
};

TEST_F(JobWriterTest, ATransitionIsWrittenWithItsEventThenShownEverywhere) {
  JobRecord& r = Job();
  std::vector<std::pair<bool, bool>> seen;  // (is a snapshot, done)
  watches_.Add(r.job.id(), [&](const v1::WatchJobResponse& u, bool done) {
    seen.emplace_back(u.has_job(), done);
  });
  ASSERT_TRUE(writer_.Transition(r, v1::SCHEDULED, "placed").ok());
  ASSERT_TRUE(writer_.Transition(r, v1::CANCELLED, "cancelled").ok());
  const std::vector<v1::Job> stored = *store_.LoadJobs();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].state(), v1::CANCELLED);
  EXPECT_EQ(stored[0].events_size(), 2);
  EXPECT_EQ(r.job.events_size(), 2);
  EXPECT_EQ(r.job.message(), "cancelled");
  EXPECT_EQ(table_.by_state(), (std::map<v1::JobState, int>{{v1::CANCELLED, 1}}));
  EXPECT_TRUE(table_.active().empty());
  EXPECT_EQ(stats_.TakeFinished(), std::vector<std::string>{r.job.id()});
  // Event and snapshot of each transition, then the final snapshot once, with done.
  EXPECT_EQ(seen, (std::vector<std::pair<bool, bool>>{
                      {false, false}, {true, false}, {false, false}, {true, false}, {true, true}}));
  EXPECT_EQ(watches_.watches(), 0u);
  EXPECT_EQ(hooked_, (std::vector<std::pair<v1::JobState, v1::JobState>>{
                         {v1::PENDING, v1::SCHEDULED}, {v1::SCHEDULED, v1::CANCELLED}}));
}

TEST_F(JobWriterTest, AFailedWriteOrAForbiddenMoveChangesNothing) {
  JobRecord& r = Job();
  store_.FailNextWrite();
  const Status st = writer_.Transition(r, v1::SCHEDULED, "placed");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.job.state(), v1::PENDING);
  EXPECT_EQ(table_.waiting().size(), 1u);
  EXPECT_TRUE(hooked_.empty());
  EXPECT_EQ(writer_.Transition(r, v1::SUCCEEDED, "never ran").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.job.state(), v1::PENDING);
}

TEST_F(JobWriterTest, ChangesWithoutAnEventAreWrittenOnceAtTheFlush) {
  JobRecord& r = Job();
  const std::string id = r.job.id();
  store_.saves.clear();
  writer_.MarkChanged(r);
  writer_.MarkChanged(r);
  EXPECT_EQ(store_.saves[id], 0);
  writer_.Flush();
  EXPECT_EQ(store_.saves[id], 1);
  writer_.Flush();
  EXPECT_EQ(store_.saves[id], 1);  // nothing changed since
}

}  // namespace job_writer_test
}  // namespace convoy

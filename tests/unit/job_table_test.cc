#include "coordinator/state/job_table.h"

#include <gtest/gtest.h>

namespace convoy {
namespace job_table_test {

class JobTableTest : public ::testing::Test {
 protected:
  AttemptRuntime Runtime() { return AttemptRuntime(FailureAttribution(clock_, 100)); }
  v1::Job Job(const std::string& id, v1::JobState state, const std::string& owner = "alice") {
    v1::Job j;
    j.set_id(id);
    j.set_state(state);
    j.set_owner(owner);
    return j;
  }
  // Moves job `id` to `to` as the JobManager does: the record first, then the indexes.
  void Move(const std::string& id, v1::JobState to) {
    JobRecord& r = table_.at(id);
    const v1::JobState from = r.job.state();
    r.job.set_state(to);
    table_.SetState(id, from, to);
  }
  FakeClock clock_;
  JobTable table_{clock_};
};

TEST_F(JobTableTest, IdsFollowEveryIdInsertedInNumericOrder) {
  EXPECT_EQ(table_.NextId(), "j-000001");
  table_.Insert(Job("j-999999", v1::SUCCEEDED), Runtime());  // as recovered from the store
  EXPECT_EQ(table_.NextId(), "j-1000000");
  table_.Insert(Job(table_.NextId(), v1::PENDING), Runtime());
  table_.Insert(Job("j-000007", v1::SUCCEEDED), Runtime());  // older: changes nothing
  EXPECT_EQ(table_.NextId(), "j-1000001");
  // Submission order: j-1000000 follows j-999999 (not as strings).
  std::vector<std::string> order;
  for (const auto& [id, r] : table_.records()) order.push_back(id);
  EXPECT_EQ(order, (std::vector<std::string>{"j-000007", "j-999999", "j-1000000"}));
}

TEST_F(JobTableTest, StateIndexesFollowEveryChange) {
  table_.Insert(Job("j-1", v1::PENDING, "alice"), Runtime());
  table_.Insert(Job("j-2", v1::PENDING, "bob"), Runtime());
  EXPECT_EQ(table_.waiting(), (JobTable::IdSet{"j-1", "j-2"}));
  EXPECT_EQ(table_.active(), (JobTable::IdSet{"j-1", "j-2"}));
  EXPECT_EQ(table_.by_state().at(v1::PENDING), 2);
  clock_.AdvanceMs(500);
  Move("j-1", v1::RENDEZVOUS);
  Move("j-1", v1::RUNNING);
  Move("j-2", v1::CANCELLED);
  EXPECT_TRUE(table_.waiting().empty());
  EXPECT_EQ(table_.active(), (JobTable::IdSet{"j-1"}));
  EXPECT_EQ(table_.by_state(), (std::map<v1::JobState, int>{{v1::RUNNING, 1}, {v1::CANCELLED, 1}}));
  EXPECT_EQ(table_.by_owner(), (std::map<std::pair<std::string, v1::JobState>, int>{
                                   {{"alice", v1::RUNNING}, 1}, {{"bob", v1::CANCELLED}, 1}}));
  // Waiting again: when it began is when it last became RESTARTING.
  clock_.AdvanceMs(700);
  Move("j-1", v1::RESTARTING);
  EXPECT_EQ(table_.waiting(), (JobTable::IdSet{"j-1"}));
  EXPECT_EQ(table_.at("j-1").waiting_since_mono_ms, clock_.NowMonotonicMs());
}

TEST_F(JobTableTest, AnAttachedAttemptIsFoundFromEachOfItsWorkersUntilDetached) {
  table_.Insert(Job("j-1", v1::RENDEZVOUS), Runtime());
  AttemptRuntime rt = Runtime();
  rt.attempt = 0;
  rt.ranks[0].worker = "w1";
  rt.ranks[1].worker = "w1";
  rt.ranks[2].worker = "w2";
  rt.ranks[2].started = true;
  rt.ranks[1].gone = true;
  JobRecord& r = table_.at("j-1");
  table_.Attach(r, std::move(rt));
  EXPECT_EQ(r.rt.ranks_by_worker.at("w1"), (std::vector<int>{0, 1}));
  EXPECT_EQ(r.rt.started_count, 1u);
  EXPECT_EQ(r.rt.gone_count, 1u);
  EXPECT_EQ(table_.attached(), (JobTable::IdSet{"j-1"}));
  EXPECT_EQ(table_.JobsOn("w1"), std::vector<std::string>{"j-1"});
  EXPECT_EQ(table_.JobsOn("w2"), std::vector<std::string>{"j-1"});
  EXPECT_TRUE(table_.JobsOn("w3").empty());
  table_.Detach(r);
  EXPECT_TRUE(table_.attached().empty());
  EXPECT_TRUE(table_.JobsOn("w1").empty());
  EXPECT_TRUE(r.rt.ranks.empty());  // a finished attempt keeps no per-rank state
}

TEST_F(JobTableTest, EraseLeavesNoTraceInAnyIndex) {
  table_.Insert(Job("j-1", v1::RUNNING), Runtime());
  table_.Insert(Job("j-2", v1::PENDING), Runtime());
  AttemptRuntime rt = Runtime();
  rt.ranks[0].worker = "w1";
  table_.Attach(table_.at("j-1"), std::move(rt));
  table_.MarkDirty("j-1");
  table_.MarkHistoryDirty("j-1");
  Move("j-1", v1::FAILED);
  table_.Erase("j-1");
  EXPECT_EQ(table_.Find("j-1"), nullptr);
  EXPECT_EQ(table_.size(), 1u);
  EXPECT_EQ(table_.by_state(), (std::map<v1::JobState, int>{{v1::PENDING, 1}}));
  EXPECT_EQ(table_.by_owner().size(), 1u);
  EXPECT_EQ(table_.active(), (JobTable::IdSet{"j-2"}));
  EXPECT_TRUE(table_.attached().empty());
  EXPECT_TRUE(table_.JobsOn("w1").empty());
  EXPECT_TRUE(table_.TakeDirty().empty());
  EXPECT_FALSE(table_.TakeHistoryDirty("j-1"));
  table_.Erase("j-1");  // twice: nothing happens
  EXPECT_EQ(table_.size(), 1u);
}

TEST_F(JobTableTest, DirtyMarksAreTakenOnce) {
  table_.Insert(Job("j-1", v1::RUNNING), Runtime());
  table_.MarkDirty("j-1");
  table_.MarkDirty("j-1");
  EXPECT_EQ(table_.TakeDirty(), std::set<std::string>{"j-1"});
  EXPECT_TRUE(table_.TakeDirty().empty());
  table_.MarkDirty("j-1");
  table_.MarkClean("j-1");  // written with a transition
  EXPECT_TRUE(table_.TakeDirty().empty());
  table_.MarkHistoryDirty("j-1");
  EXPECT_TRUE(table_.TakeHistoryDirty("j-1"));
  EXPECT_FALSE(table_.TakeHistoryDirty("j-1"));
}

}  // namespace job_table_test
}  // namespace convoy

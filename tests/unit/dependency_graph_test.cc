// The pure logic of dependencies between jobs (coordinator/state/dependency_graph.h): what
// each condition makes of each end, the reasons' words, both indexes of the graph kept in
// step, the cycle check and the cascade's order.
#include "coordinator/state/dependency_graph.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace convoy {
namespace dependency_graph_test {

v1::JobDependency Dep(const std::string& id, v1::DependencyCondition when) {
  v1::JobDependency d;
  d.set_job_id(id);
  d.set_when(when);
  return d;
}

TEST(DependencyJudgeTest, EachConditionAgainstEachEnd) {
  using V = DependencyVerdict;
  struct Case {
    v1::DependencyCondition when;
    v1::JobState state;
    V verdict;
  };
  const std::vector<Case> cases = {
      {v1::DEPENDENCY_SUCCEEDED, v1::PENDING, V::kWaiting},
      {v1::DEPENDENCY_SUCCEEDED, v1::RUNNING, V::kWaiting},
      {v1::DEPENDENCY_SUCCEEDED, v1::RESTARTING, V::kWaiting},
      {v1::DEPENDENCY_SUCCEEDED, v1::SUCCEEDED, V::kMet},
      {v1::DEPENDENCY_SUCCEEDED, v1::FAILED, V::kNever},
      {v1::DEPENDENCY_SUCCEEDED, v1::CANCELLED, V::kNever},
      {v1::DEPENDENCY_CONDITION_UNSPECIFIED, v1::SUCCEEDED, V::kMet},
      {v1::DEPENDENCY_CONDITION_UNSPECIFIED, v1::FAILED, V::kNever},
      {v1::DEPENDENCY_FAILED, v1::RUNNING, V::kWaiting},
      {v1::DEPENDENCY_FAILED, v1::FAILED, V::kMet},
      {v1::DEPENDENCY_FAILED, v1::CANCELLED, V::kMet},
      {v1::DEPENDENCY_FAILED, v1::SUCCEEDED, V::kNever},
      {v1::DEPENDENCY_ENDED, v1::SCHEDULED, V::kWaiting},
      {v1::DEPENDENCY_ENDED, v1::SUCCEEDED, V::kMet},
      {v1::DEPENDENCY_ENDED, v1::FAILED, V::kMet},
      {v1::DEPENDENCY_ENDED, v1::CANCELLED, V::kMet},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Judge(c.when, c.state), c.verdict)
        << v1::DependencyCondition_Name(c.when) << " / " << v1::JobState_Name(c.state);
  }
}

TEST(DependencyJudgeTest, ReasonsNameTheJobAndTheCondition) {
  EXPECT_EQ(WaitingReason({Dep("j-000004", v1::DEPENDENCY_SUCCEEDED)}),
            "waiting for j-000004 to succeed");
  EXPECT_EQ(WaitingReason({Dep("j-000004", v1::DEPENDENCY_SUCCEEDED),
                           Dep("j-000005", v1::DEPENDENCY_FAILED),
                           Dep("j-000006", v1::DEPENDENCY_ENDED)}),
            "waiting for j-000004 to succeed, j-000005 to fail and j-000006 to end");
  EXPECT_EQ(WaitingReason({}), "");
  EXPECT_EQ(NeverReason(Dep("j-000004", v1::DEPENDENCY_SUCCEEDED), v1::FAILED),
            "dependency j-000004 ended FAILED; this job needed it to succeed (after: j-000004, "
            "when: succeeded)");
  EXPECT_EQ(NeverReason(Dep("j-000004", v1::DEPENDENCY_FAILED), v1::SUCCEEDED),
            "dependency j-000004 ended SUCCEEDED; this job needed it to fail (after: j-000004, "
            "when: failed)");
  EXPECT_NE(DeletedReason(Dep("j-000004", v1::DEPENDENCY_ENDED)).find("j-000004 was deleted"),
            std::string::npos);
}

TEST(DependencyGraphTest, BothIndexesStayInStep) {
  DependencyGraph g;
  g.Add("j-3", "j-1");
  g.Add("j-3", "j-2");
  g.Add("j-4", "j-1");
  g.Add("j-4", "j-1");  // again: no effect
  EXPECT_TRUE(g.Waits("j-3"));
  EXPECT_FALSE(g.Waits("j-1"));
  EXPECT_EQ(g.Dependants("j-1"), (DependencyGraph::IdSet{"j-3", "j-4"}));
  EXPECT_EQ(g.WaitsFor("j-3"), (DependencyGraph::IdSet{"j-1", "j-2"}));
  EXPECT_EQ(g.waiting_jobs(), 2u);

  EXPECT_TRUE(g.Remove("j-3", "j-1"));
  EXPECT_FALSE(g.Remove("j-3", "j-1"));
  EXPECT_EQ(g.Dependants("j-1"), (DependencyGraph::IdSet{"j-4"}));
  EXPECT_TRUE(g.Waits("j-3"));
  EXPECT_TRUE(g.Remove("j-3", "j-2"));
  EXPECT_FALSE(g.Waits("j-3"));  // nothing left: no longer waits
  EXPECT_TRUE(g.Dependants("j-2").empty());

  g.Add("j-5", "j-4");
  g.DropWaits("j-4");  // j-4 failed: its own edges go, its dependants stay
  EXPECT_FALSE(g.Waits("j-4"));
  EXPECT_TRUE(g.Dependants("j-1").empty());
  EXPECT_EQ(g.Dependants("j-4"), (DependencyGraph::IdSet{"j-5"}));
  g.Erase("j-4");
  EXPECT_FALSE(g.Waits("j-5"));
  EXPECT_EQ(g.waiting_jobs(), 0u);
}

TEST(DependencyGraphTest, CyclesAreFoundAndNamed) {
  DependencyGraph g;
  // j-2 waits for j-3, j-3 for j-4: edges only an RPC-level bug could make, but the check
  // must not trust the id order.
  g.Add("j-2", "j-3");
  g.Add("j-3", "j-4");
  EXPECT_EQ(g.CycleThrough("j-4", {"j-2"}), "j-4 -> j-2 -> j-3 -> j-4");
  EXPECT_EQ(g.CycleThrough("j-4", {"j-1", "j-3"}), "j-4 -> j-3 -> j-4");
  EXPECT_EQ(g.CycleThrough("j-5", {"j-5"}), "j-5 -> j-5");  // itself
  EXPECT_FALSE(g.CycleThrough("j-5", {"j-2", "j-3"}).has_value());
  EXPECT_FALSE(g.CycleThrough("j-1", {}).has_value());
  // A diamond is no cycle.
  g.Add("j-6", "j-2");
  g.Add("j-6", "j-3");
  EXPECT_FALSE(g.CycleThrough("j-7", {"j-6", "j-2"}).has_value());
}

TEST(DependencyGraphTest, TransitiveDependantsComeNewestFirstAndCanBeFiltered) {
  DependencyGraph g;
  g.Add("j-2", "j-1");
  g.Add("j-3", "j-2");
  g.Add("j-4", "j-1");
  g.Add("j-4", "j-3");  // reached twice: listed once
  g.Add("j-10", "j-4");
  g.Add("j-9", "j-8");  // unrelated
  EXPECT_EQ(g.TransitiveDependants("j-1"), (std::vector<std::string>{"j-10", "j-4", "j-3", "j-2"}));
  // Not through j-2: j-3 is reached only through it; j-4 and j-10 through j-1 directly.
  EXPECT_EQ(g.TransitiveDependants("j-1", [](const std::string& id) { return id != "j-2"; }),
            (std::vector<std::string>{"j-10", "j-4"}));
  EXPECT_TRUE(g.TransitiveDependants("j-10").empty());
}

}  // namespace dependency_graph_test
}  // namespace convoy

// Dependencies between jobs in the JobManager (coordinator/control/dependencies.h), with a
// fake clock and the in-memory store: a waiting job is never placed however free the cluster
// is; its dependency's end judges it at once, down a chain of any length; cancel --cascade
// follows the owner's jobs only; a restart rebuilds what waits, and a dependency gone from
// the store fails its dependant.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/job_manager_fixture.h"

namespace convoy {
namespace job_manager_dependencies_test {

class JobManagerDependenciesTest : public JobManagerFixture {
 protected:
  // A 1x1 job running `/bin/true`, waiting for `after` ("j-000001" or "j-000001:failed").
  v1::JobSpec Spec(const std::vector<std::string>& after = {}, int nodes = 1) {
    v1::JobSpec spec;
    spec.set_name("step");
    spec.set_nodes(nodes);
    spec.set_procs_per_node(1);
    spec.add_command("/bin/true");
    for (const std::string& a : after) {
      v1::JobDependency* d = spec.add_after();
      const size_t colon = a.find(':');
      d->set_job_id(a.substr(0, colon));
      d->set_when(colon == std::string::npos       ? v1::DEPENDENCY_SUCCEEDED
                  : a.substr(colon + 1) == "ended" ? v1::DEPENDENCY_ENDED
                                                   : v1::DEPENDENCY_FAILED);
    }
    return spec;
  }
  static bool HasEvent(const v1::Job& job, const std::string& text) {
    for (const auto& e : job.events()) {
      if (e.reason().find(text) != std::string::npos) return true;
    }
    return false;
  }
};

TEST_F(JobManagerDependenciesTest, AWaitingJobIsNeverPlacedUntilItsDependencyEnds) {
  AddWorker("w1", 1);
  const std::string a = SubmitSpec(Spec({}, 2));  // 2 nodes on 1 worker: waits
  const std::string b = SubmitSpec(Spec({a + ":ended"}));
  Advance(6000);  // several scheduling passes with w1 free
  EXPECT_TRUE(channel_.Take(v1::CoordinatorMessage::kReservePort).empty());
  v1::Job waiting = Job(b);
  EXPECT_EQ(waiting.state(), v1::PENDING);
  EXPECT_EQ(waiting.pending_reason(), "waiting for " + a + " to end");
  ASSERT_EQ(waiting.waiting_for_size(), 1);
  EXPECT_EQ(waiting.waiting_for(0).job_id(), a);
  EXPECT_NE(waiting.message().find("waiting for " + a + " to end"), std::string::npos);
  // Listed summaries carry it too (`convoy queue`).
  bool listed = false;
  for (const v1::Job& j : jm_->List(/*full=*/false))
    listed |= j.id() == b && j.waiting_for_size() == 1;
  EXPECT_TRUE(listed);

  ASSERT_TRUE(jm_->Cancel(a, "").ok());
  const v1::Job ready = Job(b);
  EXPECT_EQ(ready.waiting_for_size(), 0);
  EXPECT_TRUE(HasEvent(ready, "dependencies met (" + a + " CANCELLED)"));
  Advance(100);
  auto ports = channel_.Take(v1::CoordinatorMessage::kReservePort);
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0].second.reserve_port().job_id(), b);
}

TEST_F(JobManagerDependenciesTest, AChainFailsAtOnceDownToItsEnd) {
  const std::string a = SubmitSpec(Spec());
  const std::string b = SubmitSpec(Spec({a}));
  const std::string c = SubmitSpec(Spec({b}));
  const std::string d = SubmitSpec(Spec({c, a + ":failed"}));
  const std::string e = SubmitSpec(Spec({a + ":failed"}));
  EXPECT_EQ(Job(d).pending_reason(), "waiting for " + c + " to succeed and " + a + " to fail");
  ASSERT_TRUE(jm_->Cancel(a, "").ok());
  EXPECT_EQ(Job(b).state(), v1::FAILED);
  EXPECT_EQ(Job(b).message(), "dependency " + a +
                                  " ended CANCELLED; this job needed it to "
                                  "succeed (after: " +
                                  a + ", when: succeeded)");
  EXPECT_EQ(Job(c).state(), v1::FAILED);
  EXPECT_NE(Job(c).message().find("dependency " + b + " ended FAILED"), std::string::npos);
  EXPECT_EQ(Job(d).state(), v1::FAILED);
  EXPECT_EQ(Job(d).waiting_for_size(), 0);
  // Needed a failure, and a cancel is one: it waits no more.
  EXPECT_EQ(Job(e).state(), v1::PENDING);
  EXPECT_EQ(Job(e).waiting_for_size(), 0);
}

TEST_F(JobManagerDependenciesTest, ADependencyAlreadyEndedIsJudgedAtSubmit) {
  const std::string a = SubmitSpec(Spec());
  ASSERT_TRUE(jm_->Cancel(a, "").ok());
  const std::string never = SubmitSpec(Spec({a}));
  EXPECT_EQ(Job(never).state(), v1::FAILED);
  EXPECT_EQ(Job(never).attempts_size(), 0);
  const std::string met = SubmitSpec(Spec({a + ":failed"}));
  EXPECT_EQ(Job(met).state(), v1::PENDING);
  EXPECT_EQ(Job(met).waiting_for_size(), 0);
}

TEST_F(JobManagerDependenciesTest, UnknownFutureAndOwnIdsAreRefusedNamingTheField) {
  const std::string a = SubmitSpec(Spec());  // j-000001
  auto own = jm_->Submit(Spec({a, "j-000002"}));
  ASSERT_EQ(own.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(own.status().message().find("after[1].job: j-000002 is the id this job would get"),
            std::string::npos)
      << own.status().message();
  EXPECT_NE(own.status().message().find("cycle"), std::string::npos);
  auto future = jm_->Submit(Spec({"j-000009"}));
  ASSERT_EQ(future.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(future.status().message().find("after[0].job: no job j-000009 yet"), std::string::npos)
      << future.status().message();
  ASSERT_TRUE(jm_->Cancel(a, "").ok());
  ASSERT_TRUE(jm_->Delete(a).ok());
  auto gone = jm_->Submit(Spec({a}));
  ASSERT_EQ(gone.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(gone.status().message().find("after[0].job: no job " + a), std::string::npos);
}

TEST_F(JobManagerDependenciesTest, CascadeCancelsTheOwnersWaitingJobsInTurn) {
  const std::string a = SubmitSpec(Spec(), "alice");
  const std::string b = SubmitSpec(Spec({a}), "alice");
  const std::string c = SubmitSpec(Spec({a}), "bob");
  const std::string d = SubmitSpec(Spec({b}), "alice");
  const std::string e = SubmitSpec(Spec({a + ":failed"}), "alice");
  auto cancelled = jm_->Cancel(a, "", "alice", /*cascade=*/true);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_NE(cancelled->message().find("cascade: also cancelled " + e + ", " + d + ", " + b),
            std::string::npos)
      << cancelled->message();
  for (const std::string& id : {b, d, e}) {
    EXPECT_EQ(Job(id).state(), v1::CANCELLED) << id;
    EXPECT_NE(Job(id).message().find("(cascade from " + a + ")"), std::string::npos) << id;
  }
  // Bob's job is not alice's to cancel: it fails by its own condition.
  EXPECT_EQ(Job(c).state(), v1::FAILED);
  EXPECT_NE(Job(c).message().find("ended CANCELLED"), std::string::npos);
}

TEST_F(JobManagerDependenciesTest, ARestartKeepsWhatWaitsAndJudgesWhatEndedMeanwhile) {
  const std::string a = SubmitSpec(Spec());
  const std::string b = SubmitSpec(Spec({a}));
  const std::string c = SubmitSpec(Spec({a + ":failed"}));
  const std::string x = SubmitSpec(Spec());
  const std::string y = SubmitSpec(Spec({x}));
  Restart();
  EXPECT_EQ(Job(b).pending_reason(), "waiting for " + a + " to succeed");
  ASSERT_EQ(Job(b).waiting_for_size(), 1);
  // x vanishes from the store while the coordinator is down (deleted by hand).
  ASSERT_TRUE(store_.DeleteJob(x).ok());
  Restart();
  EXPECT_EQ(Job(y).state(), v1::FAILED);
  EXPECT_NE(Job(y).message().find("dependency " + x + " was deleted"), std::string::npos);
  ASSERT_TRUE(jm_->Cancel(a, "").ok());
  EXPECT_EQ(Job(b).state(), v1::FAILED);
  EXPECT_EQ(Job(c).state(), v1::PENDING);
  EXPECT_EQ(Job(c).waiting_for_size(), 0);
  Restart();  // met before the restart: it does not wait again
  EXPECT_EQ(Job(c).waiting_for_size(), 0);
  EXPECT_TRUE(Job(c).pending_reason().find("waiting for") == std::string::npos);
}

}  // namespace job_manager_dependencies_test
}  // namespace convoy

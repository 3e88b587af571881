// Dependencies between jobs (README "Sweeps, dependencies and checkpoints", "Dependencies")
// through the whole stack: real gRPC to the in-process test cluster's coordinator, a real
// in-process worker running real processes (/bin/true, /bin/false, a shell that waits for a
// file the test creates). afterok runs after a success; afterok of a failed job fails at once
// with the reason; afternotok runs after a failure; a cycle is refused at submit; cancel
// --cascade cancels the chain (on SQLite); a waiting job survives a coordinator restart, on
// SQLite and on etcd.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/etcd_cluster.h"
#include "tests/support/test_cluster.h"

namespace convoy {
namespace coordinator_dependencies_test {

using namespace std::chrono_literals;

class DependenciesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "etcd" && !testing::EtcdCluster::Available()) {
      GTEST_SKIP() << "etcd is not installed (etcd-server)";
    }
    auto options = testing::TestCluster::DefaultOptions();
    options.etcd = GetParam() == "etcd";
    cluster_ = std::make_unique<testing::TestCluster>(options);
    go_ = (cluster_->dir().path() / "go").string();
    cluster_->StartWorker("w1", 2);
  }

  static v1::JobSpec Command(const std::vector<std::string>& argv) {
    v1::JobSpec spec;
    spec.set_name("step");
    spec.set_nodes(1);
    spec.set_procs_per_node(1);
    for (const std::string& a : argv) spec.add_command(a);
    return spec;
  }
  // A job that runs until the test lets it go (Go()), then succeeds.
  v1::JobSpec Held() const {
    v1::JobSpec spec = Command({"/bin/sh", "-c", "while [ ! -e \"$GO\" ]; do sleep 0.05; done"});
    (*spec.mutable_env())["GO"] = go_;
    return spec;
  }
  void Go() const { std::ofstream(go_) << "go\n"; }
  static v1::JobSpec After(v1::JobSpec spec, const std::string& job,
                           v1::DependencyCondition when = v1::DEPENDENCY_SUCCEEDED) {
    v1::JobDependency* d = spec.add_after();
    d->set_job_id(job);
    d->set_when(when);
    return spec;
  }
  grpc::Status TrySubmit(const v1::JobSpec& spec) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    v1::SubmitJobResponse resp;
    return cluster_->jobs().SubmitJob(&ctx, req, &resp);
  }
  grpc::Status Cancel(const std::string& id, bool cascade, v1::Job* out) {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_job_id(id);
    req.set_cascade(cascade);
    return cluster_->jobs().CancelJob(&ctx, req, out);
  }
  bool Ends(const std::string& id, v1::JobState state) {
    return cluster_->WaitForState(id, state, 30s);
  }

  std::unique_ptr<testing::TestCluster> cluster_;
  std::string go_;
};

TEST_P(DependenciesTest, AfterOkRunsOnlyOnceItsDependencySucceeded) {
  const std::string train = cluster_->Submit(Held());
  ASSERT_TRUE(cluster_->WaitForState(train, v1::RUNNING));
  const std::string eval = cluster_->Submit(After(Command({"/bin/true"}), train));
  // A slot is free, yet it waits: for as long as the training runs.
  std::this_thread::sleep_for(300ms);
  v1::Job waiting = cluster_->GetJob(eval);
  EXPECT_EQ(waiting.state(), v1::PENDING);
  EXPECT_EQ(waiting.pending_reason(), "waiting for " + train + " to succeed");
  ASSERT_EQ(waiting.waiting_for_size(), 1);
  EXPECT_EQ(waiting.waiting_for(0).job_id(), train);
  EXPECT_EQ(waiting.attempts_size(), 0);
  Go();
  ASSERT_TRUE(Ends(train, v1::SUCCEEDED));
  ASSERT_TRUE(Ends(eval, v1::SUCCEEDED)) << cluster_->GetJob(eval).message();
  const v1::Job done = cluster_->GetJob(eval);
  EXPECT_EQ(done.waiting_for_size(), 0);
  ASSERT_GT(done.attempts_size(), 0);
  ASSERT_GT(cluster_->GetJob(train).attempts_size(), 0);
  EXPECT_GE(done.attempts(0).started_unix_ms(),
            cluster_->GetJob(train).attempts(0).ended_unix_ms());
}

TEST_P(DependenciesTest, AfterOkOfAFailedJobFailsAtOnceWithTheReason) {
  const std::string train = cluster_->Submit(Held());
  const std::string eval = cluster_->Submit(After(Command({"/bin/true"}), train));
  const std::string report = cluster_->Submit(After(Command({"/bin/true"}), eval));
  ASSERT_TRUE(cluster_->WaitForState(train, v1::RUNNING));
  v1::Job cancelled;
  ASSERT_TRUE(Cancel(train, /*cascade=*/false, &cancelled).ok());
  ASSERT_TRUE(Ends(eval, v1::FAILED));
  const v1::Job failed = cluster_->GetJob(eval);
  EXPECT_EQ(failed.message(), "dependency " + train +
                                  " ended CANCELLED; this job needed it to succeed (after: " +
                                  train + ", when: succeeded)");
  EXPECT_EQ(failed.attempts_size(), 0);  // never placed
  // And down the chain.
  ASSERT_TRUE(Ends(report, v1::FAILED));
  EXPECT_NE(cluster_->GetJob(report).message().find("dependency " + eval + " ended FAILED"),
            std::string::npos);

  // A real failure, and a dependant submitted after it: judged at submit.
  const std::string broken = cluster_->Submit(Command({"/bin/false"}));
  ASSERT_TRUE(Ends(broken, v1::FAILED));
  const std::string late = cluster_->Submit(After(Command({"/bin/true"}), broken));
  ASSERT_TRUE(Ends(late, v1::FAILED));
  EXPECT_NE(cluster_->GetJob(late).message().find("dependency " + broken + " ended FAILED"),
            std::string::npos);
}

TEST_P(DependenciesTest, AfterNotOkRunsAfterAFailureAndAfterAnyEitherWay) {
  const std::string train = cluster_->Submit(Command({"/bin/false"}));
  const std::string cleanup =
      cluster_->Submit(After(Command({"/bin/true"}), train, v1::DEPENDENCY_FAILED));
  const std::string always =
      cluster_->Submit(After(Command({"/bin/true"}), train, v1::DEPENDENCY_ENDED));
  const std::string eval = cluster_->Submit(After(Command({"/bin/true"}), train));
  ASSERT_TRUE(Ends(train, v1::FAILED));
  EXPECT_TRUE(Ends(cleanup, v1::SUCCEEDED)) << cluster_->GetJob(cleanup).message();
  EXPECT_TRUE(Ends(always, v1::SUCCEEDED)) << cluster_->GetJob(always).message();
  EXPECT_TRUE(Ends(eval, v1::FAILED));

  // afternotok of a success can never hold.
  const std::string fine = cluster_->Submit(Command({"/bin/true"}));
  const std::string unneeded =
      cluster_->Submit(After(Command({"/bin/true"}), fine, v1::DEPENDENCY_FAILED));
  ASSERT_TRUE(Ends(fine, v1::SUCCEEDED));
  ASSERT_TRUE(Ends(unneeded, v1::FAILED));
  EXPECT_NE(cluster_->GetJob(unneeded).message().find("this job needed it to fail"),
            std::string::npos);
}

TEST_P(DependenciesTest, ACycleOrAnUnknownJobIsRefusedAtSubmitNamingTheField) {
  const std::string first = cluster_->Submit(Held());  // j-000001
  // Its own id (the next one) would close a cycle; a later one does not exist yet.
  grpc::Status own = TrySubmit(After(After(Command({"/bin/true"}), first), "j-000002"));
  EXPECT_EQ(own.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(own.error_message().find("after[1].job: j-000002 is the id this job would get"),
            std::string::npos)
      << own.error_message();
  EXPECT_NE(own.error_message().find("cycle"), std::string::npos);
  grpc::Status later = TrySubmit(After(Command({"/bin/true"}), "j-000007"));
  EXPECT_EQ(later.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(later.error_message().find("after[0].job: no job j-000007 yet"), std::string::npos)
      << later.error_message();
  grpc::Status bad = TrySubmit(After(Command({"/bin/true"}), "train"));
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("after[0].job: 'train' is not a job id"), std::string::npos)
      << bad.error_message();
  // Nothing was made by the refusals: the next job is j-000002.
  EXPECT_EQ(cluster_->Submit(After(Command({"/bin/true"}), first)), "j-000002");
  Go();
  EXPECT_TRUE(Ends("j-000002", v1::SUCCEEDED));
}

TEST_P(DependenciesTest, CascadeCancelCancelsTheWholeChain) {
  const std::string train = cluster_->Submit(Held());
  const std::string eval = cluster_->Submit(After(Command({"/bin/true"}), train));
  const std::string report = cluster_->Submit(After(Command({"/bin/true"}), eval));
  const std::string cleanup =
      cluster_->Submit(After(Command({"/bin/true"}), train, v1::DEPENDENCY_FAILED));
  const std::string other = cluster_->Submit(Command({"/bin/true"}));  // not waiting on it
  ASSERT_TRUE(cluster_->WaitForState(train, v1::RUNNING));
  v1::Job cancelled;
  grpc::Status st = Cancel(train, /*cascade=*/true, &cancelled);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(cancelled.state(), v1::CANCELLED);
  EXPECT_NE(
      cancelled.message().find("cascade: also cancelled " + cleanup + ", " + report + ", " + eval),
      std::string::npos)
      << cancelled.message();
  for (const std::string& id : {eval, report, cleanup}) {
    const v1::Job j = cluster_->GetJob(id);
    EXPECT_EQ(j.state(), v1::CANCELLED) << id;
    EXPECT_EQ(j.attempts_size(), 0) << id;
    EXPECT_NE(j.message().find("cascade from " + train), std::string::npos) << j.message();
  }
  EXPECT_TRUE(Ends(other, v1::SUCCEEDED));
}

// What touches the store runs on both (issue 30: "the same results on either store").
class DependenciesRestartTest : public DependenciesTest {};

TEST_P(DependenciesRestartTest, AWaitingJobSurvivesACoordinatorRestart) {
  const std::string train = cluster_->Submit(Held());
  const std::string eval = cluster_->Submit(After(Command({"/bin/true"}), train));
  const std::string cleanup =
      cluster_->Submit(After(Command({"/bin/true"}), train, v1::DEPENDENCY_FAILED));
  ASSERT_TRUE(cluster_->WaitForState(train, v1::RUNNING));
  cluster_->StopCoordinator();
  cluster_->StartCoordinator();
  v1::Job waiting = cluster_->GetJob(eval);
  EXPECT_EQ(waiting.state(), v1::PENDING);
  EXPECT_EQ(waiting.pending_reason(), "waiting for " + train + " to succeed");
  ASSERT_EQ(waiting.waiting_for_size(), 1);
  // The training goes on on its worker (which reconnects) and succeeds.
  Go();
  ASSERT_TRUE(Ends(train, v1::SUCCEEDED)) << cluster_->GetJob(train).message();
  EXPECT_TRUE(Ends(eval, v1::SUCCEEDED)) << cluster_->GetJob(eval).message();
  EXPECT_TRUE(Ends(cleanup, v1::FAILED));
}

const auto kStoreName = [](const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
};
INSTANTIATE_TEST_SUITE_P(Sqlite, DependenciesTest, ::testing::Values("sqlite"), kStoreName);
INSTANTIATE_TEST_SUITE_P(BothStores, DependenciesRestartTest, ::testing::Values("sqlite", "etcd"),
                         kStoreName);

}  // namespace coordinator_dependencies_test
}  // namespace convoy

// The JobStore contract, on both stores (issue 30: "the same results on either store"): SQLite
// on a real file, and etcd on real etcd members started by the test. Then what only etcd
// has: the leader's fence, and the loss of members of a three-member cluster.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "coordinator/store/etcd_client.h"
#include "coordinator/store/etcd_job_store.h"
#include "coordinator/store/sqlite_job_store.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/temp_dir.h"

namespace convoy {
namespace job_store_contract_test {

v1::Job MakeJob(const std::string& id, v1::JobState state, int attempts) {
  v1::Job job;
  job.set_id(id);
  job.mutable_spec()->set_name("name-" + id);
  job.mutable_spec()->add_command("true");
  job.set_state(state);
  job.set_created_unix_ms(1000);
  for (int i = 0; i < attempts; ++i) {
    v1::Attempt* a = job.add_attempts();
    a->set_attempt(i);
    a->add_nodes()->set_worker("w" + std::to_string(i));
  }
  return job;
}

v1::JobEvent Event(v1::JobState from, v1::JobState to, const std::string& reason) {
  v1::JobEvent e;
  e.set_from(from);
  e.set_to(to);
  e.set_reason(reason);
  return e;
}

// A metric history of `points` points on each of two ranks.
v1::JobMetrics Metrics(const std::string& id, int points) {
  v1::JobMetrics m;
  m.set_job_id(id);
  m.set_max_points(points);
  for (int r = 0; r < 2; ++r) {
    v1::RankHistory* h = m.add_ranks();
    h->set_rank(r);
    for (int i = 0; i < points; ++i) {
      v1::MetricPoint* p = h->add_points();
      p->set_step(i);
      p->set_time_unix_ms(1'700'000'000'000 + i);
    }
  }
  return m;
}

// Opens "the same" store again (a coordinator restart, or another coordinator).
class StoreFactory {
 public:
  virtual ~StoreFactory() = default;
  virtual std::unique_ptr<JobStore> Open() = 0;
};

class SqliteFactory : public StoreFactory {
 public:
  std::unique_ptr<JobStore> Open() override {
    auto store = SqliteJobStore::Open(dir_ / "convoy.db");
    EXPECT_TRUE(store.ok()) << store.status().message();
    return store.ok() ? std::move(*store) : nullptr;
  }

 private:
  testing::TempDir dir_{"convoy-store-contract"};
};

class EtcdFactory : public StoreFactory {
 public:
  EtcdFactory() : prefix_(testing::UniqueEtcdPrefix() + "convoy/") {}
  std::unique_ptr<JobStore> Open() override {
    EtcdOptions options;
    options.endpoints = testing::SharedEtcd().endpoints();
    auto client = EtcdClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status().message();
    clients_.push_back(std::move(*client));
    return std::make_unique<EtcdJobStore>(*clients_.back(), prefix_);
  }

 private:
  const std::string prefix_;
  std::vector<std::unique_ptr<EtcdClient>> clients_;  // outlive the stores of a test
};

class JobStoreContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "etcd") {
      if (!testing::EtcdCluster::Available()) GTEST_SKIP() << "etcd is not installed (etcd-server)";
      factory_ = std::make_unique<EtcdFactory>();
    } else {
      factory_ = std::make_unique<SqliteFactory>();
    }
  }
  std::unique_ptr<StoreFactory> factory_;
};

TEST_P(JobStoreContractTest, EverythingWrittenIsReadBackAfterAReopen) {
  {
    auto store = factory_->Open();
    v1::Job a = MakeJob("j-000001", v1::PENDING, 0);
    ASSERT_TRUE(store->SaveJob(a, nullptr).ok());
    const v1::JobEvent e1 = Event(v1::PENDING, v1::RUNNING, "placed");
    a.set_state(v1::RUNNING);
    *a.add_attempts() = MakeJob("x", v1::RUNNING, 1).attempts(0);
    ASSERT_TRUE(store->SaveJob(a, &e1).ok());
    const v1::JobEvent e2 = Event(v1::RUNNING, v1::SUCCEEDED, "done");
    a.set_state(v1::SUCCEEDED);
    ASSERT_TRUE(store->SaveJob(a, &e2).ok());
    ASSERT_TRUE(store->SaveJob(MakeJob("j-000002", v1::PENDING, 0), nullptr).ok());
    v1::WorkerInfo w;
    w.set_name("w1");
    w.set_slots(4);
    ASSERT_TRUE(store->SaveWorker(w).ok());
    // The largest metric history a job can have (MetricHistory::kPointsPerJob) is one value.
    ASSERT_TRUE(store->SaveJobMetrics(Metrics("j-000001", 32768)).ok());
    ASSERT_TRUE(store->SaveFileDeletion({"w1", "j-000009", "uid-9"}, true).ok());
  }
  auto store = factory_->Open();
  auto jobs = store->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id(), "j-000001");
  EXPECT_EQ((*jobs)[0].state(), v1::SUCCEEDED);
  EXPECT_EQ((*jobs)[0].attempts_size(), 1);
  ASSERT_EQ((*jobs)[0].events_size(), 2);
  EXPECT_EQ((*jobs)[0].events(0).reason(), "placed");
  EXPECT_EQ((*jobs)[0].events(1).reason(), "done");
  EXPECT_EQ((*jobs)[1].events_size(), 0);
  auto workers = store->LoadWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].slots(), 4);
  auto metrics = store->LoadJobMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status().message();
  ASSERT_EQ(metrics->size(), 1u);
  EXPECT_EQ((*metrics)[0].ranks(1).points_size(), 32768);
  auto deletions = store->LoadFileDeletions();
  ASSERT_TRUE(deletions.ok());
  ASSERT_EQ(deletions->size(), 1u);
  EXPECT_EQ((*deletions)[0].job_uid, "uid-9");
  // Events appended after a reopen continue the log.
  const v1::JobEvent e3 = Event(v1::SUCCEEDED, v1::SUCCEEDED, "noted");
  ASSERT_TRUE(store->SaveJob((*jobs)[0], &e3).ok());
  store.reset();
  jobs = factory_->Open()->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ((*jobs)[0].events_size(), 3);
  EXPECT_EQ((*jobs)[0].events(2).reason(), "noted");
}

TEST_P(JobStoreContractTest, DeletionsTakeEverythingStoredUnderTheirName) {
  auto store = factory_->Open();
  const v1::JobEvent e = Event(v1::PENDING, v1::RUNNING, "placed");
  ASSERT_TRUE(store->SaveJob(MakeJob("j-000001", v1::RUNNING, 1), &e).ok());
  ASSERT_TRUE(store->SaveJob(MakeJob("j-000002", v1::RUNNING, 1), &e).ok());
  ASSERT_TRUE(store->SaveJobMetrics(Metrics("j-000001", 10)).ok());
  v1::WorkerInfo w;
  w.set_name("w1");
  ASSERT_TRUE(store->SaveWorker(w).ok());
  w.set_name("w2");
  ASSERT_TRUE(store->SaveWorker(w).ok());
  ASSERT_TRUE(store->SaveFileDeletion({"w1", "j-000007", "u7"}, true).ok());
  ASSERT_TRUE(store->SaveFileDeletion({"w2", "j-000008", "u8"}, true).ok());
  ASSERT_TRUE(store->SaveFileDeletion({"w2", "j-000009", "u9"}, true).ok());
  ASSERT_TRUE(store->SaveFileDeletion({"w2", "j-000009", "u9"}, false).ok());  // settled

  ASSERT_TRUE(store->DeleteJob("j-000001").ok());
  ASSERT_TRUE(store->DeleteJob("j-000404").ok());  // not stored: no error
  ASSERT_TRUE(store->DeleteWorker("w1").ok());
  store.reset();

  auto reopened = factory_->Open();
  auto jobs = reopened->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id(), "j-000002");
  EXPECT_EQ((*jobs)[0].events_size(), 1);
  EXPECT_TRUE(reopened->LoadJobMetrics()->empty());
  ASSERT_EQ(reopened->LoadWorkers()->size(), 1u);
  auto deletions = reopened->LoadFileDeletions();
  ASSERT_EQ(deletions->size(), 1u);
  EXPECT_EQ((*deletions)[0].job_id, "j-000008");
  // A job of a deleted id starts a new log.
  ASSERT_TRUE(reopened->SaveJob(MakeJob("j-000001", v1::PENDING, 0), &e).ok());
  reopened.reset();
  jobs = factory_->Open()->LoadJobs();
  ASSERT_EQ((*jobs)[0].id(), "j-000001");
  EXPECT_EQ((*jobs)[0].events_size(), 1);
}

// A commit batch of hundreds of writes (a burst of submissions and transitions): every event
// in order, each job's last body, whatever number of transactions the store needs.
TEST_P(JobStoreContractTest, ALargeBatchKeepsEveryEventInOrderAndTheLastBodies) {
  std::vector<StoreWrite> batch;
  for (int round = 0; round < 20; ++round) {
    for (int j = 0; j < 25; ++j) {
      StoreWrite w;
      w.job = MakeJob("j-" + std::to_string(100000 + j), v1::RUNNING, round);
      w.event = Event(v1::RUNNING, v1::RUNNING, "round " + std::to_string(round));
      batch.push_back(w);
    }
    StoreWrite worker;
    worker.worker.emplace();
    worker.worker->set_name("w1");
    worker.worker->set_slots(round);
    batch.push_back(worker);
  }
  ASSERT_TRUE(factory_->Open()->Write(batch).ok());
  auto jobs = factory_->Open()->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 25u);
  for (const v1::Job& job : *jobs) {
    EXPECT_EQ(job.attempts_size(), 19) << job.id();
    ASSERT_EQ(job.events_size(), 20) << job.id();
    for (int round = 0; round < 20; ++round) {
      EXPECT_EQ(job.events(round).reason(), "round " + std::to_string(round));
    }
  }
  EXPECT_EQ((*factory_->Open()->LoadWorkers())[0].slots(), 19);
}

INSTANTIATE_TEST_SUITE_P(BothStores, JobStoreContractTest, ::testing::Values("sqlite", "etcd"),
                         [](const auto& info) { return info.param; });

// ---- etcd only

class EtcdStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::EtcdCluster::Available()) GTEST_SKIP() << "etcd is not installed";
  }
  static std::unique_ptr<EtcdClient> Client(const testing::EtcdCluster& etcd) {
    EtcdOptions options;
    options.endpoints = etcd.endpoints();
    options.call_timeout_ms = 1500;
    auto client = EtcdClient::Create(options);
    EXPECT_TRUE(client.ok());
    return std::move(*client);
  }
  // Creates `key` bound to a new lease (a campaign that won); its create revision.
  static int64_t Elect(EtcdClient& client, const std::string& key, int64_t* lease) {
    auto granted = client.GrantLease(10);
    EXPECT_TRUE(granted.ok()) << granted.status().message();
    *lease = *granted;
    auto won = client.CreateIfAbsent(key, "coordinator", *lease);
    EXPECT_TRUE(won.ok() && won->created);
    return won.ok() ? won->revision : 0;
  }
};

TEST_F(EtcdStoreTest, ADeposedLeaderCanNeverWriteAgain) {
  testing::EtcdCluster etcd(1);
  auto client = Client(etcd);
  const std::string key = "/convoy/leader";
  int64_t lease = 0;
  EtcdJobStore old_leader(*client, "/convoy/");
  old_leader.SetFence(key, Elect(*client, key, &lease));
  ASSERT_TRUE(old_leader.SaveJob(MakeJob("j-000001", v1::PENDING, 0), nullptr).ok());

  // Its lease ends (a partition, a pause longer than the TTL) and another coordinator wins.
  ASSERT_TRUE(client->RevokeLease(lease).ok());
  int64_t new_lease = 0;
  EtcdJobStore new_leader(*client, "/convoy/");
  new_leader.SetFence(key, Elect(*client, key, &new_lease));
  v1::Job cancelled = MakeJob("j-000001", v1::CANCELLED, 0);
  ASSERT_TRUE(new_leader.SaveJob(cancelled, nullptr).ok());

  // The old leader, back, still believes it leads: its write is refused, and changes nothing.
  Status refused = old_leader.SaveJob(MakeJob("j-000001", v1::RUNNING, 1), nullptr);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.message();
  EXPECT_NE(refused.message().find("no longer the leader"), std::string::npos);
  auto jobs = new_leader.LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].state(), v1::CANCELLED);
}

// How etcd answers a read or a write it cannot get a quorum for in time: its own context's
// end, which gRPC-Go sends as UNKNOWN. The store must call that unavailable (the write's
// outcome unknown, retried unchanged), as it does the client's own deadline, and not an
// internal error that fails the coordinator's commit.
TEST(FromEtcdTest, EtcdsOwnTimeoutIsUnavailableLikeTheClientsDeadline) {
  const grpc::Status etcds(grpc::StatusCode::UNKNOWN, "context deadline exceeded");
  EXPECT_EQ(FromEtcd(etcds, "etcd range at a:1").code(), StatusCode::kUnavailable);
  EXPECT_EQ(FromEtcd(etcds, "etcd range at a:1").message(),
            "etcd range at a:1: context deadline exceeded");
  const grpc::Status ours(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  EXPECT_EQ(FromEtcd(ours, "etcd txn").code(), StatusCode::kUnavailable);
  // Any other UNKNOWN is not a timeout.
  const grpc::Status other(grpc::StatusCode::UNKNOWN, "etcdserver: mvcc: corrupt");
  EXPECT_EQ(FromEtcd(other, "etcd txn").code(), StatusCode::kInternal);
  EXPECT_EQ(FromEtcd(grpc::Status(grpc::StatusCode::NOT_FOUND, "x"), "get").code(),
            StatusCode::kNotFound);
}

TEST_F(EtcdStoreTest, OneOfThreeMembersLostStopsNothingTwoStopWritesUntilTheyReturn) {
  testing::EtcdCluster etcd(3);
  auto client = Client(etcd);
  EtcdJobStore store(*client, "/convoy/");
  ASSERT_TRUE(store.SaveJob(MakeJob("j-000001", v1::PENDING, 0), nullptr).ok());

  etcd.Kill(0);
  Status st = store.SaveJob(MakeJob("j-000002", v1::PENDING, 0), nullptr);
  EXPECT_TRUE(st.ok()) << "one member of three lost: " << st.message();

  etcd.Kill(1);
  // Without a quorum the write times out: UNAVAILABLE, its outcome unknown (the member left
  // may commit it once the others are back), so the coordinator retries it, unchanged.
  v1::Job third = MakeJob("j-000003", v1::PENDING, 0);
  const v1::JobEvent submitted = Event(v1::JOB_STATE_UNSPECIFIED, v1::PENDING, "submitted");
  st = store.SaveJob(third, &submitted);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();

  etcd.Start(0);
  etcd.Start(1);
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    back = store.SaveJob(third, &submitted).ok();  // the retry, as the commit thread does
    if (!back) usleep(100'000);
  }
  EXPECT_TRUE(back) << "writes did not resume with the members back";
  ASSERT_TRUE(store.SaveJob(MakeJob("j-000004", v1::PENDING, 0), nullptr).ok());
  auto jobs = EtcdJobStore(*Client(etcd), "/convoy/").LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  std::vector<std::string> ids;
  for (const v1::Job& j : *jobs) ids.push_back(j.id());
  // Nothing acknowledged is lost, and the retried write's event is there once, whether or
  // not its first try landed.
  EXPECT_EQ(ids, (std::vector<std::string>{"j-000001", "j-000002", "j-000003", "j-000004"}));
  ASSERT_EQ((*jobs)[2].events_size(), 1);
  EXPECT_EQ((*jobs)[2].events(0).reason(), "submitted");
}

}  // namespace job_store_contract_test
}  // namespace convoy

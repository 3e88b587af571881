// Leader election among coordinators on real etcd (issue 30): one leads, another waits; a
// clean stop hands over at once, a lost lease is noticed by the old leader, and the fencing
// token changes with every leader.
#include "coordinator/store/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "tests/support/etcd_cluster.h"
#include "tests/support/test_cluster.h"

namespace convoy {
namespace leader_election_test {

using namespace std::chrono_literals;

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::EtcdCluster::Available()) GTEST_SKIP() << "etcd is not installed";
    etcd_ = std::make_unique<testing::EtcdCluster>(1);
    client_ = Client();
  }
  std::unique_ptr<EtcdClient> Client() {
    EtcdOptions options;
    options.endpoints = etcd_->endpoints();
    options.call_timeout_ms = 1000;
    auto client = EtcdClient::Create(options);
    EXPECT_TRUE(client.ok());
    return std::move(*client);
  }
  static LeaderElection::Options Named(const std::string& who) {
    LeaderElection::Options o;
    o.key = "/convoy/leader";
    o.value = who;
    o.ttl_s = 2;
    o.renew_ms = 200;
    o.poll_ms = 50;
    return o;
  }
  std::unique_ptr<testing::EtcdCluster> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(LeaderElectionTest, OneLeadsTheOtherWaitsAndTakesOverWhenTheFirstResigns) {
  auto other_client = Client();
  LeaderElection a(*client_, Named("a:7070"));
  ASSERT_TRUE(a.Campaign([] { return false; }).ok());
  EXPECT_EQ(a.Leader(), "a:7070");
  a.StartRenewal([](const std::string& why) { ADD_FAILURE() << "a lost: " << why; });

  LeaderElection b(*other_client, Named("b:7070"));
  std::atomic<bool> give_up{false};
  auto campaign =
      std::async(std::launch::async, [&] { return b.Campaign([&] { return give_up.load(); }); });
  // b waits while a renews (longer than the lease's TTL).
  EXPECT_EQ(campaign.wait_for(3s), std::future_status::timeout);
  a.Resign();  // a clean stop: b leads at once, not a TTL later
  ASSERT_EQ(campaign.wait_for(5s), std::future_status::ready);
  ASSERT_TRUE(campaign.get().ok());
  EXPECT_EQ(b.Leader(), "b:7070");
  EXPECT_GT(b.revision(), a.revision()) << "the fencing token must change with the leader";
}

TEST_F(LeaderElectionTest, ALeaderWhoseLeaseIsGoneIsToldAtOnce) {
  LeaderElection a(*client_, Named("a:7070"));
  ASSERT_TRUE(a.Campaign([] { return false; }).ok());
  std::promise<std::string> lost;
  a.StartRenewal([&](const std::string& why) { lost.set_value(why); });
  // Its lease ends behind its back (as when it was paused for longer than the TTL).
  ASSERT_TRUE(client_->RevokeLease(a.lease()).ok());
  auto told = lost.get_future();
  ASSERT_EQ(told.wait_for(5s), std::future_status::ready);
  EXPECT_NE(told.get().find("no longer the leader"), std::string::npos);
  EXPECT_EQ(a.Leader(), "");  // the key went with the lease
}

TEST_F(LeaderElectionTest, AFollowerThatIsStoppedLeavesNoLeaseBehind) {
  LeaderElection a(*client_, Named("a:7070"));
  ASSERT_TRUE(a.Campaign([] { return false; }).ok());
  LeaderElection b(*client_, Named("b:7070"));
  int polls = 0;
  Status st = b.Campaign([&] { return ++polls > 5; });
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(b.lease(), 0);
  EXPECT_EQ(a.Leader(), "a:7070");
}

// --leader-lease is the TTL of the lease that holds a coordinator's leader key in etcd.
TEST(CoordinatorLeaderLeaseTest, TheFlagIsTheTtlOfTheLeadersLease) {
  if (!testing::EtcdCluster::Available()) GTEST_SKIP() << "etcd is not installed";
  auto options = testing::TestCluster::DefaultOptions();
  options.etcd = true;
  options.flags.leader_lease_s = 7;
  testing::TestCluster cluster(options);
  EtcdOptions eo;
  eo.endpoints = testing::SharedEtcd().endpoints();
  auto client = EtcdClient::Create(eo);
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto kvs = (*client)->GetPrefix(cluster.etcd_prefix() + "leader");
  ASSERT_TRUE(kvs.ok()) << kvs.status().message();
  ASSERT_EQ(kvs->size(), 1u);
  ASSERT_NE((*kvs)[0].lease(), 0);
  auto lease = etcdserverpb::Lease::NewStub(
      grpc::CreateChannel(eo.endpoints[0], grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  etcdserverpb::LeaseTimeToLiveRequest req;
  req.set_id((*kvs)[0].lease());
  etcdserverpb::LeaseTimeToLiveResponse resp;
  const grpc::Status st = lease->LeaseTimeToLive(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.grantedttl(), 7);
}

}  // namespace leader_election_test
}  // namespace convoy

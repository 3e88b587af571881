// Code archives kept in etcd as well as on the leader's disk (issue 30: "nothing acknowledged
// is lost"): an archive uploaded to one coordinator is there for the next leader, whose disk
// never saw it; an upload the store cannot keep is not acknowledged. Real etcd member.
#include <gtest/gtest.h>

#include <random>

#include "common/pki.h"
#include "coordinator/store/code_store.h"
#include "coordinator/store/etcd_code_replica.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/temp_dir.h"

namespace convoy {
namespace code_store_replica_test {

class CodeStoreReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::EtcdCluster::Available()) GTEST_SKIP() << "etcd is not installed (etcd-server)";
    EtcdOptions options;
    options.endpoints = testing::SharedEtcd().endpoints();
    client_ = std::move(*EtcdClient::Create(options));
  }
  // A coordinator's code store: its own disk, the cluster's etcd.
  std::unique_ptr<CodeStore> Open(const std::string& name) {
    auto store = CodeStore::Open(dir_ / name, MakeEtcdCodeReplica(*client_, prefix_));
    EXPECT_TRUE(store.ok()) << store.status().message();
    return std::move(*store);
  }
  static std::string Bytes(size_t n) {
    std::mt19937 rng(7);
    std::string out(n, '\0');
    for (char& c : out) c = static_cast<char>(rng());
    return out;
  }
  static Status Upload(CodeStore& store, const std::string& data, const std::string& user) {
    const std::string sha = Sha256Hex(data);
    const size_t half = data.size() / 2;
    auto first =
        store.Append(sha, static_cast<int64_t>(data.size()), 0, data.substr(0, half), user);
    if (!first.ok()) return first.status();
    auto rest = store.Append(sha, static_cast<int64_t>(data.size()), static_cast<int64_t>(half),
                             data.substr(half), user);
    if (!rest.ok()) return rest.status();
    return rest->complete ? Status::Ok() : Status::Internal("not complete");
  }

  testing::TempDir dir_{"convoy-code-replica"};
  const std::string prefix_ = testing::UniqueEtcdPrefix() + "convoy/";
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(CodeStoreReplicaTest, TheNextLeaderHasEveryArchiveWithItsOwners) {
  const std::string data = Bytes(2 * kCodeChunkBytes + 12345);  // three chunks
  const std::string sha = Sha256Hex(data);
  auto first = Open("c1");
  ASSERT_TRUE(Upload(*first, data, "alice").ok());
  first.reset();

  auto next = Open("c2");  // another machine's disk: never saw the upload
  EXPECT_TRUE(next->Has(sha));
  EXPECT_TRUE(next->OwnedBy(sha, "alice"));
  EXPECT_FALSE(next->OwnedBy(sha, "bob"));  // knowing the hash is not having the code
  int64_t total = 0;
  auto read = next->Read(sha, 0, static_cast<int64_t>(data.size()), &total);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(total, static_cast<int64_t>(data.size()));
  EXPECT_EQ(*read, data);

  // bob proves he has the bytes on this leader: an owner on the next one too.
  ASSERT_TRUE(Upload(*next, data, "bob").ok());
  EXPECT_TRUE(Open("c3")->OwnedBy(sha, "bob"));

  // Collected (no job names it) on one leader: gone for every leader.
  const auto removed = next->Collect({}, -1);
  EXPECT_EQ(removed, std::vector<std::string>{sha});
  EXPECT_FALSE(Open("c4")->Has(sha));
  auto left = client_->GetPrefix(prefix_);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty()) << left->size() << " keys left, first " << left->front().key();
}

TEST_F(CodeStoreReplicaTest, AnUploadEtcdCannotKeepIsNotAcknowledged) {
  EtcdOptions nowhere;
  nowhere.endpoints = {"127.0.0.1:1"};
  nowhere.call_timeout_ms = 500;
  auto dead = std::move(*EtcdClient::Create(nowhere));
  auto store = CodeStore::Open(dir_ / "c1", MakeEtcdCodeReplica(*dead, prefix_));
  ASSERT_TRUE(store.ok());
  const std::string data = Bytes(1000);
  Status st = Upload(**store, data, "alice");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();
  EXPECT_NE(st.message().find("upload it again"), std::string::npos) << st.message();
  EXPECT_FALSE((*store)->Has(Sha256Hex(data)));
}

}  // namespace code_store_replica_test
}  // namespace convoy

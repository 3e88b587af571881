// A worker joining a secured cluster for real (worker/link/credentials.h against the coordinator's
// JoinService over TLS on loopback), and renewing its certificate on a fake clock: not before
// 2/3 of its lifetime, and well before it expires.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <ctime>

#include "tests/support/test_cluster.h"
#include "worker/link/credentials.h"

namespace convoy {
namespace coordinator_worker_join_test {

class WorkerJoinTest : public ::testing::Test {
 protected:
  static testing::TestCluster::Options Secure() {
    auto o = testing::TestCluster::DefaultOptions();
    o.secure = true;
    return o;
  }
  CredentialOptions Options(const std::string& name, const std::string& token) {
    CredentialOptions o;
    o.coordinator = cluster_.address();
    o.name = name;
    o.work_dir = cluster_.dir() / name;
    mkdir(o.work_dir.c_str(), 0755);
    o.join_token = token;
    o.ca_fingerprint = cluster_.pki().ca_fingerprint;
    return o;
  }
  testing::TestCluster cluster_{Secure()};
  FakeClock clock_{static_cast<int64_t>(std::time(nullptr)) * 1000};
};

TEST(RenewAtTest, TwoThirdsOfTheLifetime) {
  EXPECT_EQ(RenewAtS(0, 86400), 57600);
  EXPECT_EQ(RenewAtS(1000, 1300), 1200);
}

TEST_F(WorkerJoinTest, JoinsStoresRenewsBeforeExpiryAndRestartsWithoutAToken) {
  const std::string token = cluster_.MakeToken("join", Role::kWorker, 3600'000, 1);
  auto creds = WorkerCredentials::Create(Options("w1", token), clock_, 5000);
  ASSERT_TRUE(creds.ok()) << creds.status().message();
  struct stat st;
  ASSERT_EQ(stat((cluster_.dir() / "w1/tls/worker.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  uint64_t gen0 = 0;
  (*creds)->Current(&gen0);
  const int64_t not_after = (*creds)->not_after_s();
  const int64_t now_s = clock_.NowUnixMs() / 1000;
  ASSERT_GT(not_after, now_s + 23 * 3600);  // 24 h, issued now (less the skew allowance)

  // Before 2/3 of the lifetime: nothing happens.
  clock_.AdvanceMs((RenewAtS(now_s - 300, not_after) - now_s - 60) * 1000);
  ASSERT_TRUE((*creds)->MaybeRenew().ok());
  uint64_t gen = 0;
  (*creds)->Current(&gen);
  EXPECT_EQ(gen, gen0);
  EXPECT_EQ((*creds)->not_after_s(), not_after);

  // Past 2/3, still hours before expiry: renewed over mutual TLS, a new certificate.
  clock_.AdvanceMs(120'000);
  Status renewed = (*creds)->MaybeRenew();
  ASSERT_TRUE(renewed.ok()) << renewed.message();
  (*creds)->Current(&gen);
  EXPECT_NE(gen, gen0);
  EXPECT_LT(clock_.NowUnixMs() / 1000, not_after);

  // A restart reuses the stored certificate: the (used-up) token is not needed.
  auto again = WorkerCredentials::Create(Options("w1", token), clock_, 5000);
  ASSERT_TRUE(again.ok()) << again.status().message();

  // Another worker with the used-up token is refused with the reason.
  auto refused = WorkerCredentials::Create(Options("w2", token), clock_, 5000);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("used up"), std::string::npos)
      << refused.status().message();
}

TEST_F(WorkerJoinTest, AWrongFingerprintIsRefusedBeforeTheTokenIsSent) {
  const std::string token = cluster_.MakeToken("join", Role::kWorker, 3600'000, 1);
  CredentialOptions o = Options("w1", token);
  o.ca_fingerprint = "SHA256:" + std::string(64, 'a');
  auto refused = WorkerCredentials::Create(o, clock_, 5000);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("does not match --ca-fingerprint"), std::string::npos);
  // The token was never presented: it still works.
  EXPECT_TRUE(WorkerCredentials::Create(Options("w1", token), clock_, 5000).ok());
}

TEST_F(WorkerJoinTest, AStoredCertificateForAnotherNameIsNotUsed) {
  const std::string token = cluster_.MakeToken("join", Role::kWorker, 3600'000, 2);
  ASSERT_TRUE(WorkerCredentials::Create(Options("w1", token), clock_, 5000).ok());
  // The same work dir under another name: the stored certificate says w1, so w3 joins anew.
  CredentialOptions o = Options("w3", token);
  o.work_dir = cluster_.dir() / "w1";
  auto w3 = WorkerCredentials::Create(o, clock_, 5000);
  ASSERT_TRUE(w3.ok()) << w3.status().message();
  auto info = InspectCertificate(*ReadWholeFile(cluster_.dir() / "w1/tls/worker.crt"));
  EXPECT_EQ(info->common_name, "w3");
  // Nothing at all: a message that says what to pass.
  CredentialOptions none = Options("w4", "");
  none.ca_fingerprint.clear();
  auto missing = WorkerCredentials::Create(none, clock_, 5000);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--join-token"), std::string::npos);
}

}  // namespace coordinator_worker_join_test
}  // namespace convoy

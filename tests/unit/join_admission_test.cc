// Who may join as which worker name (issue 28), moved out of the JoinService: an unbound
// join token takes only a free name, a bound one only its own name (even while held); a use
// is taken only from a request that is allowed; the certificate issued is recorded.
#include "coordinator/control/join_admission.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/support/memory_token_backend.h"

namespace convoy {
namespace join_admission_test {

constexpr int64_t kHourMs = 3'600'000;

class JoinAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokens = TokenStore::Open(std::make_unique<MemoryTokenBackend>());
    ASSERT_TRUE(tokens.ok());
    tokens_ = std::move(*tokens);
    admission_ = std::make_unique<JoinAdmission>(
        *tokens_, clock_, [this](const std::string& name) { return connected_.count(name) > 0; });
  }
  std::string JoinToken(int uses, const std::string& name = "") {
    return *tokens_->Create("join", Role::kWorker, kHourMs, uses, clock_.NowUnixMs(), nullptr,
                            name);
  }
  // Joins, issuing a certificate valid for an hour.
  StatusOr<TokenRecord> Join(const std::string& token, const std::string& name) {
    return admission_->Join(token, name, [this]() -> StatusOr<int64_t> {
      ++issued_;
      return clock_.NowUnixMs() / 1000 + 3600;
    });
  }

  FakeClock clock_;
  std::unique_ptr<TokenStore> tokens_;
  std::set<std::string> connected_;
  std::unique_ptr<JoinAdmission> admission_;
  int issued_ = 0;
};

TEST_F(JoinAdmissionTest, AnUnboundTokenTakesAFreeNameAndItsCertificateIsRecorded) {
  const std::string token = JoinToken(2);
  auto joined = Join(token, "w1");
  ASSERT_TRUE(joined.ok()) << joined.status().message();
  EXPECT_EQ(issued_, 1);
  EXPECT_EQ(*tokens_->CertificateNotAfter("w1"), clock_.NowUnixMs() / 1000 + 3600);
  auto holder = admission_->Holder("w1");
  ASSERT_TRUE(holder.ok());
  EXPECT_NE(holder->find("a worker certificate valid until"), std::string::npos) << *holder;
}

TEST_F(JoinAdmissionTest, AnUnboundTokenCannotTakeAHeldNameAndKeepsItsUse) {
  const std::string token = JoinToken(1);
  connected_.insert("w1");
  auto refused = Join(token, "w1");
  ASSERT_EQ(refused.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(refused.status().message().rfind("name: 'w1' is held by a connected worker", 0), 0u)
      << refused.status().message();
  ASSERT_TRUE(tokens_->RecordCertificate("w2", clock_.NowUnixMs() / 1000 + 60).ok());
  EXPECT_EQ(Join(token, "w2").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(issued_, 0);
  // Its one use is still there; and a certificate that has expired holds no name.
  clock_.AdvanceMs(61'000);
  EXPECT_TRUE(Join(token, "w2").ok());
  EXPECT_EQ(Join(token, "w3").status().code(), StatusCode::kUnauthenticated);  // used up
}

TEST_F(JoinAdmissionTest, ABoundTokenJoinsOnlyAsItsNameEvenWhileItIsHeld) {
  const std::string token = JoinToken(2, "w1");
  auto other = Join(token, "w2");
  ASSERT_EQ(other.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(other.status().message().rfind("name: join token", 0), 0u);
  connected_.insert("w1");
  auto joined = Join(token, "w1");
  ASSERT_TRUE(joined.ok()) << joined.status().message();
  EXPECT_EQ(joined->name, "w1");
}

TEST_F(JoinAdmissionTest, WhatTheIssuerRefusesIsRecordedNowhere) {
  const std::string token = JoinToken(1);
  auto refused = admission_->Join(token, "w1", []() -> StatusOr<int64_t> {
    return Status::InvalidArgument("csr_pem: not a certificate request");
  });
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*tokens_->CertificateNotAfter("w1"), 0);
}

}  // namespace join_admission_test
}  // namespace convoy

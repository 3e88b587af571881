// Forgetting a worker: the registry's removal and the name's certificate record, combined as
// JobService.ForgetWorker answers; the record's removal (a store write) never runs on the
// Coordinator's commit thread, which keeps committing meanwhile.
#include "coordinator/control/worker_forgetter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "tests/support/fake_worker_stream.h"
#include "tests/support/memory_job_store.h"
#include "tests/support/memory_token_backend.h"

namespace convoy {
namespace coordinator_worker_forgetter_test {

using namespace std::chrono_literals;

v1::Register Registration(const std::string& name) {
  v1::Register reg;
  reg.set_name(name);
  reg.set_address("127.0.0.1");
  reg.set_cores(1);
  reg.set_slots(1);
  return reg;
}

v1::JobSpec OneRank() {
  v1::JobSpec spec;
  spec.set_name("one");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("true");
  return spec;
}

class WorkerForgetterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = std::make_unique<MemoryTokenBackend>();
    certs_ = backend.get();
    auto tokens = TokenStore::Open(std::move(backend));
    ASSERT_TRUE(tokens.ok()) << tokens.status().message();
    tokens_ = std::move(*tokens);
    CoordinatorOptions options;
    options.run_ticker = false;
    coordinator_ = std::make_unique<Coordinator>(clock_, store_, options);
    ASSERT_TRUE(coordinator_->Start().ok());
    forgetter_ = std::make_unique<WorkerForgetter>(*coordinator_, tokens_.get());
  }
  void TearDown() override {
    certs_->Open();
    coordinator_->Stop();
  }

  // A worker that registered, whose stream ended and which was then declared LOST (it may
  // be forgotten).
  void Lost(const std::string& name) {
    auto stream = std::make_shared<FakeStream>();
    coordinator_->OnRegister(Registration(name), stream);
    coordinator_->OnStreamClosed(name, stream.get());
    clock_.AdvanceMs(CoordinatorOptions().worker_timeout_ms + 1);
    coordinator_->Tick();
    coordinator_->Flush();
  }

  WorkerForgetter::Outcome Forget(const std::string& name) {
    std::promise<WorkerForgetter::Outcome> got;
    forgetter_->Forget(name, "admin", [&](WorkerForgetter::Outcome o) { got.set_value(o); });
    return got.get_future().get();
  }

  FakeClock clock_;
  MemoryJobStore store_;
  MemoryTokenBackend* certs_ = nullptr;
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<WorkerForgetter> forgetter_;
};

TEST_F(WorkerForgetterTest, TheCertificateRecordGoesWithTheWorker) {
  Lost("w1");
  ASSERT_TRUE(tokens_->RecordCertificate("w1", 2'000'000'000).ok());
  WorkerForgetter::Outcome out = Forget("w1");
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  ASSERT_TRUE(out.forgotten.has_value());
  EXPECT_EQ(out.forgotten->worker.name(), "w1");
  EXPECT_EQ(*tokens_->CertificateNotAfter("w1"), 0);
}

// Joined (a certificate record) but never registered: forgetting it frees the name.
TEST_F(WorkerForgetterTest, ANameThatOnlyJoinedIsForgottenByItsRecord) {
  ASSERT_TRUE(tokens_->RecordCertificate("w8", 2'000'000'000).ok());
  WorkerForgetter::Outcome out = Forget("w8");
  EXPECT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_FALSE(out.forgotten.has_value());
  EXPECT_EQ(*tokens_->CertificateNotAfter("w8"), 0);
  EXPECT_EQ(Forget("nobody").status.code(), StatusCode::kNotFound);
}

TEST_F(WorkerForgetterTest, AConnectedWorkerIsRefusedAndItsRecordKept) {
  coordinator_->OnRegister(Registration("w1"), std::make_shared<FakeStream>());
  ASSERT_TRUE(tokens_->RecordCertificate("w1", 2'000'000'000).ok());
  EXPECT_EQ(Forget("w1").status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(*tokens_->CertificateNotAfter("w1"), 2'000'000'000);
}

TEST(WorkerForgetterCombineTest, TheRegistryAndTheRecordMakeOneAnswer) {
  const JobManager::ForgottenWorker w;
  const Status not_found = Status::NotFound("no worker");
  EXPECT_TRUE(WorkerForgetter::Combine(w, true).status.ok());
  EXPECT_TRUE(WorkerForgetter::Combine(w, false).status.ok());
  EXPECT_TRUE(WorkerForgetter::Combine(not_found, true).status.ok());
  EXPECT_EQ(WorkerForgetter::Combine(not_found, false).status.code(), StatusCode::kNotFound);
  const auto broken = WorkerForgetter::Combine(w, Status::Unavailable("tokens: locked"));
  EXPECT_EQ(broken.status.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(broken.forgotten.has_value());
}

// Issue 44: the record's removal is a store write; on the commit thread it would hold every
// reply and message behind it. With the token store stuck, the Coordinator still commits
// and answers.
TEST_F(WorkerForgetterTest, TheRecordIsRemovedOffTheCommitThread) {
  Lost("w1");
  auto stream = std::make_shared<FakeStream>();
  coordinator_->OnRegister(Registration("w2"), stream);
  certs_->Shut();
  std::promise<WorkerForgetter::Outcome> forgotten;
  forgetter_->Forget("w1", "admin",
                     [&](WorkerForgetter::Outcome o) { forgotten.set_value(std::move(o)); });
  certs_->WaitForgetting();  // the removal is under way, and stuck
  std::promise<StatusOr<std::string>> submitted;
  coordinator_->Submit(OneRank(), "", "", "",
                       [&](const StatusOr<std::string>& id) { submitted.set_value(id); });
  coordinator_->Tick();
  auto reply = submitted.get_future();
  const bool answered = reply.wait_for(30s) == std::future_status::ready;
  certs_->Open();
  EXPECT_TRUE(forgotten.get_future().get().status.ok());
  ASSERT_TRUE(answered) << "the commit thread is held by the certificate record's removal";
  EXPECT_TRUE(reply.get().ok());
}

}  // namespace coordinator_worker_forgetter_test
}  // namespace convoy

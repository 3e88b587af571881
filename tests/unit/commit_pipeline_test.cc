// The group-commit pipeline, with the in-memory store and fake streams: what is queued while
// a write is in flight goes to the store in one transaction; no message or callback leaves
// before its batch is durable; a failing store is retried, said to refuse writes meanwhile,
// and given up on (crash-only) when it keeps failing; Stop commits what is queued.
#include "coordinator/control/commit_pipeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/support/fake_worker_stream.h"
#include "tests/support/memory_job_store.h"

namespace convoy {
namespace commit_pipeline_test {

using namespace std::chrono_literals;

// A MemoryJobStore whose writes wait while the gate is shut, and which counts them.
class GatedStore : public MemoryJobStore {
 public:
  Status Write(const std::vector<StoreWrite>& writes) override {
    {
      MutexLock lock(mu_);
      ++entered_;
      entered_cv_.SignalAll();
      while (shut_) open_cv_.Wait(mu_);
      sizes_.push_back(writes.size());
    }
    return MemoryJobStore::Write(writes);
  }
  void Shut() {
    MutexLock lock(mu_);
    shut_ = true;
  }
  void Open() {
    MutexLock lock(mu_);
    shut_ = false;
    open_cv_.SignalAll();
  }
  // Waits until `n` writes have begun.
  void WaitEntered(int n) {
    MutexLock lock(mu_);
    while (entered_ < n) entered_cv_.Wait(mu_);
  }
  std::vector<size_t> sizes() {
    MutexLock lock(mu_);
    return sizes_;
  }

 private:
  Mutex mu_;
  CondVar open_cv_, entered_cv_;
  bool shut_ GUARDED_BY(mu_) = false;
  int entered_ GUARDED_BY(mu_) = 0;
  std::vector<size_t> sizes_ GUARDED_BY(mu_);
};

StoreWrite JobWrite(const std::string& id) {
  StoreWrite w;
  w.job = v1::Job();
  w.job->set_id(id);
  w.job->set_state(v1::PENDING);
  return w;
}

Effects Decided(const std::string& id, std::shared_ptr<WorkerStream> stream,
                std::function<void()> after) {
  Effects e;
  e.writes.push_back(JobWrite(id));
  if (stream) {
    v1::CoordinatorMessage msg;
    msg.mutable_kill()->set_job_id(id);
    e.sends.emplace_back(std::move(stream), msg);
  }
  if (after) e.after.push_back(std::move(after));
  return e;
}

// Waits (up to a generous bound, never asserting a duration) until `done` holds.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 3000 && !done(); ++i) std::this_thread::sleep_for(10ms);
  return done();
}

TEST(CommitPipelineTest, WhatIsQueuedDuringAWriteGoesToTheStoreInOneTransaction) {
  GatedStore store;
  CommitPipeline pipeline(store, {});
  pipeline.Start();
  store.Shut();
  pipeline.Queue(Decided("j-000001", nullptr, nullptr));
  store.WaitEntered(1);  // the first batch is being written
  pipeline.Queue(Decided("j-000002", nullptr, nullptr));
  pipeline.Queue(Decided("j-000003", nullptr, nullptr));
  pipeline.Queue(Decided("j-000004", nullptr, nullptr));
  EXPECT_FALSE(pipeline.Idle());
  store.Open();
  pipeline.Flush();
  EXPECT_TRUE(pipeline.Idle());
  EXPECT_EQ(store.sizes(), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(store.LoadJobs()->size(), 4u);
}

TEST(CommitPipelineTest, NoMessageOrCallbackLeavesBeforeItsBatchIsDurable) {
  MemoryJobStore store;
  CommitPipeline pipeline(store, {600000, nullptr});
  pipeline.Start();
  auto stream = std::make_shared<FakeStream>();
  std::vector<std::string> order;  // written by the commit thread only
  store.FailEveryWrite();
  pipeline.Queue(Decided("j-000001", stream, [&] {
    order.push_back(std::to_string(stream->Messages().size()) + " message(s) out");
  }));
  // The commit thread has met the failure: it retries, holding the batch's effects.
  ASSERT_TRUE(Eventually([&] { return !pipeline.AcceptsWrites().ok(); }));
  EXPECT_TRUE(stream->Messages().empty());
  EXPECT_FALSE(pipeline.Idle());

  store.StopFailing();
  pipeline.Flush();
  ASSERT_EQ(stream->Messages().size(), 1u);
  EXPECT_EQ(stream->Messages()[0].kill().job_id(), "j-000001");
  // The messages go before the callbacks (a reply never overtakes the launch it reports).
  EXPECT_EQ(order, std::vector<std::string>{"1 message(s) out"});
  EXPECT_EQ(store.LoadJobs()->size(), 1u);
}

// While a write is retried the pipeline says the store refuses writes, with the store's
// error; once a retry succeeds it accepts them again.
TEST(CommitPipelineTest, ItSaysWhyTheStoreRefusesWritesUntilARetryWorks) {
  MemoryJobStore store;
  CommitPipeline pipeline(store, {600000, nullptr});
  pipeline.Start();
  EXPECT_TRUE(pipeline.AcceptsWrites().ok());
  store.FailEveryWrite();
  pipeline.Queue(Decided("j-000001", nullptr, nullptr));
  ASSERT_TRUE(Eventually([&] { return !pipeline.AcceptsWrites().ok(); }));
  const Status refusing = pipeline.AcceptsWrites();
  EXPECT_EQ(refusing.code(), StatusCode::kUnavailable);
  EXPECT_NE(refusing.message().find("injected write failure"), std::string::npos)
      << refusing.message();
  EXPECT_NE(refusing.message().find("nothing was changed"), std::string::npos);
  store.StopFailing();
  pipeline.Flush();
  EXPECT_TRUE(pipeline.AcceptsWrites().ok());
}

// A store that keeps failing does not keep the coordinator retrying forever behind a growing
// queue: after store_give_up_ms it stops, saying why (crash-only); nothing it could not
// persist was acknowledged.
TEST(CommitPipelineTest, AStoreThatKeepsFailingIsGivenUpOnWithItsReason) {
  MemoryJobStore store;
  Mutex mu;
  std::string lost;  // under mu
  CommitPipeline pipeline(store, {300, [&](const std::string& why) {
                                    MutexLock lock(mu);
                                    lost = why;
                                  }});
  pipeline.Start();
  store.FailEveryWrite();
  std::atomic<bool> replied{false};
  pipeline.Queue(Decided("j-000001", nullptr, [&] { replied = true; }));
  pipeline.Flush();  // returns once the commit thread gave up
  {
    MutexLock lock(mu);
    EXPECT_NE(lost.find("the durable store has failed for"), std::string::npos) << lost;
    EXPECT_NE(lost.find("injected write failure"), std::string::npos) << lost;
    EXPECT_NE(lost.find("crash-only"), std::string::npos) << lost;
  }
  EXPECT_FALSE(replied) << "a change that was never persisted was acknowledged";
  pipeline.Stop();
}

TEST(CommitPipelineTest, NothingDecidedIsNothingQueued) {
  MemoryJobStore store;
  CommitPipeline pipeline(store, {});
  pipeline.Start();
  pipeline.Queue(Effects());
  EXPECT_TRUE(pipeline.Idle());
  pipeline.Flush();  // returns at once
}

TEST(CommitPipelineTest, StopCommitsWhatIsQueued) {
  GatedStore store;
  CommitPipeline pipeline(store, {});
  pipeline.Start();
  store.Shut();
  pipeline.Queue(Decided("j-000001", nullptr, nullptr));
  store.WaitEntered(1);
  std::atomic<bool> replied{false};
  pipeline.Queue(Decided("j-000002", nullptr, [&] { replied = true; }));
  std::thread stopper([&] { pipeline.Stop(); });
  store.Open();
  stopper.join();
  EXPECT_TRUE(replied);
  EXPECT_EQ(store.LoadJobs()->size(), 2u);
  pipeline.Stop();  // idempotent
}

}  // namespace commit_pipeline_test
}  // namespace convoy

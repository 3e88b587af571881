// The Coordinator's guarantees, with a fake clock, the in-memory store and fake streams:
// what a locked section decides is durable before any message or reply acting on it goes
// out; RegisterAck is the first message on a new stream; watch updates come in order; a
// newer stream replaces an older one.
#include "coordinator/control/coordinator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/support/fake_worker_stream.h"
#include "tests/support/memory_job_store.h"

namespace convoy {
namespace coordinator_test {

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

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions options;
    options.run_ticker = false;
    options.jobs.lifecycle.failure_window_ms = 100;
    coordinator_ = std::make_unique<Coordinator>(clock_, store_, options);
    ASSERT_TRUE(coordinator_->Start().ok());
  }

  // Submits and waits for the (durable) reply.
  std::string Submit(const v1::JobSpec& spec) {
    std::atomic<bool> done{false};
    std::string id;
    coordinator_->Submit(spec, "", "", "", [&](const StatusOr<std::string>& r) {
      EXPECT_TRUE(r.ok());
      if (r.ok()) id = *r;
      done = true;
    });
    coordinator_->Tick();  // places it, if Submit did not already
    coordinator_->Flush();
    EXPECT_TRUE(done);
    return id;
  }

  void Send(const std::string& worker, const v1::WorkerMessage& msg) {
    coordinator_->OnWorkerMessage(worker, msg);
  }

  FakeClock clock_;
  MemoryJobStore store_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(CoordinatorTest, RegisterAckComesFirstEvenWhenRegisteringDecidesAKill) {
  auto stream = std::make_shared<FakeStream>();
  v1::Register reg = Registration("w1");
  v1::AttemptStatus* stale = reg.add_attempts();  // an attempt of a job nobody knows
  stale->set_job_id("j-000099");
  stale->set_attempt(0);
  v1::RankStatus* rank = stale->add_ranks();
  rank->set_pid(77);
  rank->set_running(true);
  coordinator_->OnRegister(reg, stream);
  coordinator_->Flush();
  auto got = stream->Messages();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].has_register_ack());
  ASSERT_TRUE(got[1].has_kill());
  EXPECT_EQ(got[1].kill().job_id(), "j-000099");
}

TEST_F(CoordinatorTest, NeitherReplyNorMessageLeavesBeforeTheWriteIsDurable) {
  auto stream = std::make_shared<FakeStream>();
  coordinator_->OnRegister(Registration("w1"), stream);
  coordinator_->Flush();
  ASSERT_EQ(stream->Messages().size(), 1u);  // the ack

  store_.FailEveryWrite();  // the submit's commits fail until StopFailing; the thread retries
  std::atomic<bool> replied{false};
  coordinator_->Submit(OneRank(), "", "", "", [&](const StatusOr<std::string>& r) {
    EXPECT_TRUE(r.ok());
    replied = true;
  });
  coordinator_->Tick();
  // The job is decided (visible to readers) but neither acknowledged nor acted on.
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(coordinator_->Get("j-000001").ok());
  EXPECT_FALSE(replied);
  EXPECT_EQ(stream->Messages().size(), 1u);

  store_.StopFailing();
  coordinator_->Flush();  // a retry succeeds
  EXPECT_TRUE(replied);
  auto got = stream->Messages();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[1].has_reserve_port());
  auto stored = store_.LoadJobs();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].state(), v1::RENDEZVOUS);
}

// A client's read answers only with committed state: while the submit's write is still
// failing, a GetJob or ListJobs of it waits; once the write is durable, it answers. With
// nothing pending, it answers at once.
TEST_F(CoordinatorTest, AClientReadWaitsUntilWhatItShowsIsDurable) {
  store_.FailEveryWrite();  // the submit's commit fails, and every retry, until StopFailing
  std::atomic<bool> replied{false};
  std::string id;
  coordinator_->Submit(OneRank(), "", "", "", [&](const StatusOr<std::string>& r) {
    ASSERT_TRUE(r.ok());
    id = *r;
    replied = true;
  });
  // The id is j-000001 (JobManager's first); the in-memory state has it already.
  ASSERT_TRUE(coordinator_->Get("j-000001").ok());
  std::atomic<bool> got_job{false};
  std::atomic<bool> got_page{false};
  coordinator_->GetCommitted("j-000001", [&](const StatusOr<v1::Job>& job) {
    EXPECT_TRUE(job.ok());
    EXPECT_TRUE(replied) << "the read answered before the submit's reply";
    got_job = true;
  });
  coordinator_->ListPageCommitted(JobQuery{}, [&](const JobManager::JobPage& page) {
    EXPECT_EQ(page.jobs.size(), 1u);
    got_page = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(got_job) << "a read showed a job whose write had not reached the store";
  EXPECT_FALSE(got_page);
  EXPECT_TRUE(store_.LoadJobs()->empty());

  store_.StopFailing();
  coordinator_->Flush();  // a retry succeeds; the reads answer after it
  EXPECT_TRUE(got_job);
  EXPECT_TRUE(got_page);
  EXPECT_EQ(store_.LoadJobs()->size(), 1u);

  bool inline_answer = false;  // nothing pending: answered before GetCommitted returns
  coordinator_->GetCommitted(id, [&](const StatusOr<v1::Job>& job) {
    EXPECT_TRUE(job.ok());
    inline_answer = true;
  });
  EXPECT_TRUE(inline_answer);
}

// While the store refuses writes, a client's change is refused at once (UNAVAILABLE, saying
// why) and changes nothing, rather than waiting behind the failing commit; once the store
// writes again, changes are accepted, and the one that was waiting is answered.
TEST(CoordinatorStoreTest, ChangesAreRefusedSayingWhyWhileTheStoreFails) {
  FakeClock clock;
  MemoryJobStore store;
  CoordinatorOptions options;
  options.run_ticker = false;
  options.store_give_up_ms = 600000;
  Coordinator coordinator(clock, store, options);
  ASSERT_TRUE(coordinator.Start().ok());
  EXPECT_TRUE(coordinator.pipeline().AcceptsWrites().ok());
  store.FailEveryWrite();
  std::atomic<bool> first_replied{false};
  coordinator.Submit(OneRank(), "", "", "",
                     [&](const StatusOr<std::string>& id) { first_replied = id.ok(); });
  // The commit thread meets the failure and keeps retrying.
  for (int i = 0; i < 500 && coordinator.pipeline().AcceptsWrites().ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const Status refusing = coordinator.pipeline().AcceptsWrites();
  ASSERT_EQ(refusing.code(), StatusCode::kUnavailable);
  EXPECT_NE(refusing.message().find("injected write failure"), std::string::npos)
      << refusing.message();
  StatusOr<std::string> second = Status::Ok();
  coordinator.Submit(OneRank(), "", "", "", [&](const StatusOr<std::string>& id) { second = id; });
  ASSERT_EQ(second.status().code(), StatusCode::kUnavailable);  // answered at once
  EXPECT_NE(second.status().message().find("nothing was changed"), std::string::npos);
  StatusOr<v1::Job> cancelled = Status::Ok();
  coordinator.Cancel("j-000001", "", "", [&](const StatusOr<v1::Job>& j) { cancelled = j; });
  EXPECT_EQ(cancelled.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(coordinator.Get("j-000002").ok());  // the refused submit made no job

  store.StopFailing();
  coordinator.Flush();
  EXPECT_TRUE(first_replied);
  EXPECT_TRUE(coordinator.pipeline().AcceptsWrites().ok());
  std::string third;
  coordinator.Submit(OneRank(), "", "", "",
                     [&](const StatusOr<std::string>& id) { third = id.ok() ? *id : ""; });
  coordinator.Flush();
  EXPECT_EQ(third, "j-000002");
  coordinator.Stop();
}

TEST_F(CoordinatorTest, WatchUpdatesComeInOrderFromSnapshotToTheEnd) {
  auto stream = std::make_shared<FakeStream>();
  coordinator_->OnRegister(Registration("w1"), stream);
  const std::string id = Submit(OneRank());

  Mutex mu;
  std::vector<std::pair<v1::WatchJobResponse, bool>> seen;
  auto watched = coordinator_->Watch(id, [&](const v1::WatchJobResponse& u, bool done) {
    MutexLock lock(mu);
    seen.emplace_back(u, done);
  });
  ASSERT_TRUE(watched.ok());

  v1::WorkerMessage port;
  port.mutable_port_reserved()->set_job_id(id);
  port.mutable_port_reserved()->set_port(40000);
  Send("w1", port);
  v1::WorkerMessage started;
  started.mutable_process_started()->set_job_id(id);
  started.mutable_process_started()->set_pid(10);
  Send("w1", started);
  v1::WorkerMessage exited;
  exited.mutable_process_exited()->set_job_id(id);
  Send("w1", exited);
  coordinator_->Flush();

  MutexLock lock(mu);
  ASSERT_GE(seen.size(), 3u);
  ASSERT_TRUE(seen.front().first.has_job());
  EXPECT_EQ(seen.front().first.job().state(), v1::RENDEZVOUS);
  std::vector<v1::JobState> events;
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].second, i + 1 == seen.size()) << "done only on the last update";
    if (seen[i].first.has_event()) events.push_back(seen[i].first.event().to());
  }
  EXPECT_EQ(events, (std::vector<v1::JobState>{v1::RUNNING, v1::SUCCEEDED}));
  ASSERT_TRUE(seen.back().first.has_job());
  EXPECT_EQ(seen.back().first.job().state(), v1::SUCCEEDED);
}

TEST_F(CoordinatorTest, ANewerStreamReplacesTheOlderOne) {
  auto first = std::make_shared<FakeStream>();
  auto second = std::make_shared<FakeStream>();
  coordinator_->OnRegister(Registration("w1"), first);
  coordinator_->OnRegister(Registration("w1"), second);
  coordinator_->Flush();
  EXPECT_NE(first->close_reason().find("replaced"), std::string::npos);
  EXPECT_EQ(coordinator_->streams().size(), 1u);

  // The old stream ending says nothing about the worker, which is on the new one.
  coordinator_->OnStreamClosed("w1", first.get());
  ASSERT_EQ(coordinator_->ListWorkers().size(), 1u);
  EXPECT_EQ(coordinator_->ListWorkers()[0].state(), v1::WORKER_READY);
  const std::string id = Submit(OneRank());
  coordinator_->Flush();
  ASSERT_EQ(second->Messages().size(), 2u);
  EXPECT_TRUE(second->Messages()[1].has_reserve_port());
  EXPECT_EQ(first->Messages().size(), 1u);

  coordinator_->OnStreamClosed("w1", second.get());
  EXPECT_EQ(coordinator_->ListWorkers()[0].state(), v1::WORKER_UNREACHABLE);
  EXPECT_EQ(coordinator_->streams().size(), 0u);
  (void)id;
}

}  // namespace coordinator_test
}  // namespace convoy

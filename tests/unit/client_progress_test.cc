// The live view of `convoy watch`: plain lines when not on a terminal, in-place redraws on
// one, JSON lines with --output json; the final state, test accuracy and root cause.
#include "client/progress.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <sstream>

namespace convoy {
namespace client_progress_test {

constexpr int64_t kT0 = 1'700'000'000'000;  // 22:13:20 UTC

class ProgressViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TZ", "UTC", 1);
    tzset();
  }

  // A 2-rank job in `state`, attempt `attempt`, with the given events.
  static v1::WatchJobResponse Snapshot(v1::JobState state, int attempt = 0, int events = 1) {
    v1::WatchJobResponse u;
    v1::Job* job = u.mutable_job();
    job->set_id("j-000001");
    job->mutable_spec()->set_name("demo");
    job->set_state(state);
    job->set_attempt(attempt);
    job->set_created_unix_ms(kT0);
    job->set_updated_unix_ms(kT0 + 62'000);
    job->set_message(state == v1::SUCCEEDED ? "all 2 ranks exited with code 0" : "working");
    v1::Attempt* a = job->add_attempts();
    a->set_attempt(attempt);
    for (int r = 0; r < 2; ++r) {
      v1::NodeAssignment* n = a->add_nodes();
      n->set_group_rank(r);
      n->add_ranks(r);
    }
    for (int i = 0; i < events; ++i) *job->add_events() = EventAt(i).event();
    return u;
  }

  // The i-th event of the job's history.
  static v1::WatchJobResponse EventAt(int i) {
    static const v1::JobState kStates[] = {v1::PENDING, v1::SCHEDULED, v1::RENDEZVOUS, v1::RUNNING,
                                           v1::SUCCEEDED};
    v1::WatchJobResponse u;
    v1::JobEvent* e = u.mutable_event();
    e->set_time_unix_ms(kT0 + i * 1000);
    e->set_from(i == 0 ? v1::JOB_STATE_UNSPECIFIED : kStates[i - 1]);
    e->set_to(kStates[i]);
    e->set_reason("event " + std::to_string(i));
    return u;
  }

  static v1::WatchJobResponse Metric(int rank, int64_t step, int attempt = 0) {
    v1::WatchJobResponse u;
    v1::MetricRecord* m = u.mutable_metric();
    m->set_rank(rank);
    m->set_attempt(attempt);
    m->set_time_unix_ms(kT0 + step);
    m->set_epoch(1);
    m->set_step(step);
    m->set_has_step(true);
    m->set_loss(0.5);
    m->set_has_loss(true);
    (*m->mutable_values())["samples_per_s"] = 1000;
    return u;
  }

  static v1::WatchJobResponse Eval(int rank, double accuracy) {
    v1::WatchJobResponse u;
    v1::MetricRecord* m = u.mutable_metric();
    m->set_rank(rank);
    m->set_kind("eval");
    m->set_step(100);
    m->set_has_step(true);
    (*m->mutable_values())["test_accuracy"] = accuracy;
    return u;
  }

  static size_t Count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
  }

  std::ostringstream out_;
};

TEST_F(ProgressViewTest, PlainModePrintsEventsAtOnceAndProgressAtMostEveryTwoSeconds) {
  ProgressView view(out_, {});
  view.Update(Snapshot(v1::RUNNING, 0, 4), kT0);  // the history so far
  EXPECT_EQ(out_.str(),
            "22:13:20  - -> PENDING  event 0\n"
            "22:13:21  PENDING -> SCHEDULED  event 1\n"
            "22:13:22  SCHEDULED -> RENDEZVOUS  event 2\n"
            "22:13:23  RENDEZVOUS -> RUNNING  event 3\n");
  out_.str("");
  view.Update(Metric(0, 10), kT0 + 2'000);
  view.Update(Metric(1, 10), kT0 + 2'100);  // within 2 s: no line
  view.Update(Metric(0, 20), kT0 + 3'000);
  EXPECT_EQ(out_.str(),
            "22:13:22  RUNNING  attempt 0 | rank 0: epoch 1  step 10  loss 0.5000  1000 "
            "samples/s\n");
  out_.str("");
  view.Update(Metric(1, 20), kT0 + 4'000);
  EXPECT_EQ(Count(out_.str(), "\n"), 1u);
  EXPECT_NE(out_.str().find("rank 0: epoch 1  step 20"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("rank 1: epoch 1  step 20"), std::string::npos) << out_.str();
  EXPECT_EQ(out_.str().find('\033'), std::string::npos) << "no escapes off a terminal";
  EXPECT_FALSE(view.Finished());
}

TEST_F(ProgressViewTest, EventsAreShownOnceAndMissedOnesAfterAReconnect) {
  ProgressView view(out_, {});
  view.Update(Snapshot(v1::PENDING, 0, 1), kT0);
  view.Update(EventAt(1), kT0);
  view.Update(Snapshot(v1::SCHEDULED, 0, 2), kT0);  // the coordinator's snapshot after it
  EXPECT_EQ(Count(out_.str(), "event 1"), 1u) << out_.str();
  // The stream broke and events 2 and 3 happened meanwhile: the new call's snapshot has them.
  view.Update(Snapshot(v1::RUNNING, 0, 4), kT0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Count(out_.str(), "event " + std::to_string(i)), 1u) << out_.str();
  }
}

TEST_F(ProgressViewTest, APendingJobSaysWhyItWaitsAndEachNewReason) {
  ProgressView view(out_, {});
  v1::WatchJobResponse first = Snapshot(v1::PENDING, 0, 1);
  first.mutable_job()->set_pending_reason("needs 2 workers with 1 free slot; 1 has them now");
  first.mutable_job()->set_queue_position(1);
  view.Update(first, kT0);
  EXPECT_EQ(out_.str(),
            "22:13:20  - -> PENDING  event 0\n"
            "22:13:20  waiting: needs 2 workers with 1 free slot; 1 has them now (#1 in the "
            "queue)\n");
  EXPECT_TRUE(view.Waiting());
  // The same reason again (the poller's GetJob): nothing new.
  out_.str("");
  view.ShowWaiting(first.job(), kT0 + 2'000);
  EXPECT_EQ(out_.str(), "");
  // A new reason is shown once.
  v1::Job later = first.job();
  later.set_pending_reason("needs 2 workers with 1 free slot; 0 have them now");
  later.set_queue_position(2);
  view.ShowWaiting(later, kT0 + 4'000);
  view.ShowWaiting(later, kT0 + 6'000);
  EXPECT_EQ(out_.str(),
            "22:13:24  waiting: needs 2 workers with 1 free slot; 0 have them now (#2 in the "
            "queue)\n");
  // Once placed, a stale PENDING copy is ignored, and the reason is no longer polled for.
  out_.str("");
  view.Update(EventAt(1), kT0 + 7'000);
  EXPECT_FALSE(view.Waiting());
  later.set_pending_reason("something stale");
  view.ShowWaiting(later, kT0 + 8'000);
  EXPECT_EQ(out_.str(), "22:13:21  PENDING -> SCHEDULED  event 1\n");
}

TEST_F(ProgressViewTest, WhyItWaitsIsNotAddedToJsonOutput) {
  ProgressView::Options o;
  o.mode = ProgressView::Mode::kJson;
  ProgressView view(out_, o);
  v1::WatchJobResponse first = Snapshot(v1::PENDING, 0, 1);
  view.Update(first, kT0);
  EXPECT_FALSE(view.Waiting()) << "nothing to poll for";
  out_.str("");
  first.mutable_job()->set_pending_reason("needs 2 workers");
  view.ShowWaiting(first.job(), kT0 + 2'000);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(ProgressViewTest, SucceededJobEndsWithTheFinalTestAccuracy) {
  ProgressView view(out_, {});
  view.Update(Snapshot(v1::RUNNING, 0, 4), kT0);
  view.Update(Metric(0, 100), kT0 + 10'000);
  view.Update(Metric(1, 100), kT0 + 10'000);
  view.Update(Eval(0, 0.8712), kT0 + 11'000);
  view.Update(Eval(1, 0.8712), kT0 + 11'000);
  view.Update(EventAt(4), kT0 + 12'000);
  view.Update(Snapshot(v1::SUCCEEDED, 0, 5), kT0 + 12'000);
  ASSERT_TRUE(view.Finished());
  out_.str("");
  EXPECT_EQ(view.Finish(), 0);
  EXPECT_EQ(out_.str(),
            "  rank 0  epoch 0  step 100  loss 0.5000  1000 samples/s  test acc 87.12%\n"
            "  rank 1  epoch 0  step 100  loss 0.5000  1000 samples/s  test acc 87.12%\n"
            "job j-000001 SUCCEEDED after 1m02s: all 2 ranks exited with code 0\n"
            "final test accuracy: 87.12%\n");
}

TEST_F(ProgressViewTest, FailedJobEndsWithItsRootCause) {
  ProgressView view(out_, {});
  v1::WatchJobResponse snap = Snapshot(v1::FAILED, 1, 1);
  v1::RankFailure* f = snap.mutable_job()->mutable_attempts(0)->mutable_failure();
  f->set_rank(1);
  f->set_local_rank(1);
  f->set_worker("w1");
  f->set_host("10.0.0.1");
  f->mutable_exit()->set_exit_code(7);
  f->mutable_exit()->add_stderr_tail("boom");
  f->set_reason("rank 1 on worker w1 (10.0.0.1) exited with code 7");
  snap.mutable_job()->set_message(f->reason());
  view.Update(snap, kT0);
  out_.str("");
  EXPECT_EQ(view.Finish(), 1);
  EXPECT_EQ(out_.str(),
            "job j-000001 FAILED after 1m02s: rank 1 on worker w1 (10.0.0.1) exited with code 7\n"
            "root cause (attempt 1):\n"
            "  rank 1 on worker w1 (10.0.0.1) exited with code 7\n"
            "    rank 1, worker w1, host 10.0.0.1: exited with code 7\n"
            "    last lines of its stderr:\n"
            "      | boom\n");
}

TEST_F(ProgressViewTest, CancelledIsNotSuccess) {
  ProgressView view(out_, {});
  view.Update(Snapshot(v1::CANCELLED), kT0);
  EXPECT_TRUE(view.Finished());
  EXPECT_EQ(view.Finish(), 1);
}

TEST_F(ProgressViewTest, AFailureEventShowsItsRankAndStderr) {
  ProgressView view(out_, {});
  v1::WatchJobResponse u;
  v1::JobEvent* e = u.mutable_event();
  e->set_time_unix_ms(kT0);
  e->set_from(v1::RUNNING);
  e->set_to(v1::RESTARTING);
  e->set_reason("rank 0 on worker w1 (h) killed by SIGKILL");
  e->mutable_failure()->set_worker("w1");
  e->mutable_failure()->set_host("h");
  e->mutable_failure()->mutable_exit()->set_signal(9);
  e->mutable_failure()->mutable_exit()->add_stderr_tail("last words");
  view.Update(u, kT0);
  EXPECT_EQ(out_.str(),
            "22:13:20  RUNNING -> RESTARTING  rank 0 on worker w1 (h) killed by "
            "SIGKILL\n"
            "    rank 0, worker w1, host h: killed by SIGKILL\n"
            "    last lines of its stderr:\n"
            "      | last words\n");
}

TEST_F(ProgressViewTest, ANewAttemptStartsWithNoRanks) {
  ProgressView view(out_, {});
  view.Update(Snapshot(v1::RUNNING), kT0);
  view.Update(Metric(0, 50), kT0 + 3'000);
  view.Update(Metric(1, 50, /*attempt=*/1), kT0 + 6'000);
  view.Update(Metric(0, 60, /*attempt=*/0), kT0 + 9'000);  // late, from the old attempt
  const std::string last = out_.str().substr(out_.str().rfind("22:"));
  EXPECT_EQ(last,
            "22:13:26  RUNNING  attempt 1 | rank 1: epoch 1  step 50  loss 0.5000  1000 "
            "samples/s\n");
}

TEST_F(ProgressViewTest, ManyRanksAreSummarisedOffATerminal) {
  ProgressView view(out_, {});
  view.Update(Snapshot(v1::RUNNING), kT0);
  for (int r = 0; r < 8; ++r) view.Update(Metric(r, 10 + r), kT0 + 1);
  view.Update(Metric(0, 30), kT0 + 5'000);
  EXPECT_NE(out_.str().find(" | 8 ranks: step 11-30  mean loss 0.5000  8000 samples/s\n"),
            std::string::npos)
      << out_.str();
}

TEST_F(ProgressViewTest, TerminalModeRedrawsOneLinePerRankInPlace) {
  ProgressView::Options o;
  o.mode = ProgressView::Mode::kTerminal;
  o.terminal_columns = 60;
  ProgressView view(out_, o);
  view.Update(Snapshot(v1::RUNNING, 0, 0), kT0);
  // A header and a line for each rank of the placement, before any record.
  EXPECT_EQ(out_.str(),
            "j-000001 (demo)  RUNNING  attempt 0  0s\n"
            "  rank 0  RUNNING  no metrics yet\n"
            "  rank 1  RUNNING  no metrics yet\n");
  out_.str("");
  view.Update(Metric(0, 7), kT0 + 1'000);
  EXPECT_EQ(out_.str(),
            "\r\033[3A\033[J"
            "j-000001 (demo)  RUNNING  attempt 0  1s\n"
            "  rank 0  RUNNING  epoch 1  step 7  loss 0.5000  1000 sampl\n"  // cut to 59 columns
            "  rank 1  RUNNING  no metrics yet\n");
  out_.str("");
  view.Update(Metric(1, 7), kT0 + 1'100);  // within 200 ms: no redraw
  EXPECT_EQ(out_.str(), "");
  // An event goes above the live lines, which are drawn again under it.
  view.Update(EventAt(3), kT0 + 1'150);
  EXPECT_EQ(out_.str().rfind("\r\033[3A\033[J22:13:23  RENDEZVOUS -> RUNNING  event 3\n"
                             "j-000001",
                             0),
            0u)
      << out_.str();
  // Interrupt leaves a clean terminal for a message; the end replaces the live lines.
  out_.str("");
  view.Interrupt();
  EXPECT_EQ(out_.str(), "\r\033[3A\033[J");
  view.Interrupt();
  EXPECT_EQ(out_.str(), "\r\033[3A\033[J") << "nothing drawn, nothing erased";
}

TEST_F(ProgressViewTest, JsonModePrintsOneObjectPerUpdateAndNothingElse) {
  ProgressView::Options o;
  o.mode = ProgressView::Mode::kJson;
  ProgressView view(out_, o);
  view.Update(Snapshot(v1::RUNNING, 0, 1), kT0);
  view.Update(Metric(0, 1), kT0);
  view.Update(EventAt(4), kT0);
  EXPECT_TRUE(view.Finished()) << "the event's state counts before the final snapshot";
  EXPECT_EQ(view.Finish(), 0);
  std::istringstream lines(out_.str());
  std::string line;
  std::vector<std::string> all;
  while (std::getline(lines, line)) all.push_back(line);
  ASSERT_EQ(all.size(), 3u) << out_.str();
  EXPECT_EQ(all[0].rfind(R"({"job":{"id":"j-000001")", 0), 0u) << all[0];
  EXPECT_EQ(all[1].rfind(R"({"metric":{"rank":0)", 0), 0u) << all[1];
  EXPECT_EQ(all[2].rfind(R"({"event":{)", 0), 0u) << all[2];
  EXPECT_NE(all[2].find(R"("to":"SUCCEEDED")"), std::string::npos) << all[2];
}

}  // namespace client_progress_test
}  // namespace convoy

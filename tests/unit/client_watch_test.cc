// FollowJob, the loop of `convoy watch`: exit codes by the job's end, and reconnection with
// backoff when the stream breaks (a coordinator restart), on a fake clock with fake calls.
#include "client/watch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <sstream>
#include <vector>

#include "client/format.h"

namespace convoy {
namespace client_watch_test {

// A scripted WatchJob call: these updates, then this status.
struct Script {
  std::vector<v1::WatchJobResponse> updates;
  grpc::Status status;
};

class FakeCall : public WatchCall {
 public:
  explicit FakeCall(Script s) : script_(std::move(s)) {}
  bool Read(v1::WatchJobResponse* update) override {
    if (next_ == script_.updates.size()) return false;
    *update = script_.updates[next_++];
    return true;
  }
  grpc::Status Finish() override { return script_.status; }

 private:
  Script script_;
  size_t next_ = 0;
};

class FollowJobTest : public ::testing::Test {
 protected:
  static v1::WatchJobResponse Snapshot(v1::JobState state) {
    v1::WatchJobResponse u;
    u.mutable_job()->set_id("j-000001");
    u.mutable_job()->set_state(state);
    return u;
  }
  static grpc::Status Unavailable() {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses");
  }

  // Runs FollowJob over the scripted calls; once they are used up every call is unavailable.
  int Follow(bool connected = false, ConnectFailureExplainer explain = nullptr) {
    FollowOptions options;
    options.connected = connected;
    options.explain = std::move(explain);
    options.now_ms = [this] { return now_; };
    options.wait_ms = [this](int64_t ms) {
      sleeps_.push_back(ms);
      now_ += ms;
    };
    ProgressView::Options view_options;
    view_options.mode = ProgressView::Mode::kJson;  // quiet and simple to count
    ProgressView view(out_, view_options);
    return FollowJob(
        "j-000001",
        [this]() -> std::unique_ptr<WatchCall> {
          ++calls_;
          if (scripts_.empty()) return std::make_unique<FakeCall>(Script{{}, Unavailable()});
          Script s = scripts_.front();
          scripts_.pop_front();
          return std::make_unique<FakeCall>(s);
        },
        view, options, err_);
  }

  std::deque<Script> scripts_;
  int calls_ = 0;
  int64_t now_ = 1'000'000;
  std::vector<int64_t> sleeps_;
  std::ostringstream out_, err_;
};

TEST_F(FollowJobTest, ExitsZeroOnlyWhenTheJobSucceeded) {
  scripts_ = {{{Snapshot(v1::RUNNING), Snapshot(v1::SUCCEEDED)}, grpc::Status::OK}};
  EXPECT_EQ(Follow(), 0);
  scripts_ = {{{Snapshot(v1::RUNNING), Snapshot(v1::FAILED)}, grpc::Status::OK}};
  EXPECT_EQ(Follow(), 1);
  scripts_ = {{{Snapshot(v1::CANCELLED)}, grpc::Status::OK}};
  EXPECT_EQ(Follow(), 1);
  EXPECT_EQ(calls_, 3);
  EXPECT_TRUE(sleeps_.empty());
  EXPECT_EQ(err_.str(), "");
}

TEST_F(FollowJobTest, AnUnreachableCoordinatorEndsAFreshWatchAtOnce) {
  EXPECT_EQ(Follow(), kExitUnavailable);
  EXPECT_EQ(calls_, 1);
  EXPECT_TRUE(sleeps_.empty());
  EXPECT_NE(err_.str().find("convoy: watch j-000001: cannot reach the coordinator: failed to "
                            "connect to all addresses"),
            std::string::npos)
      << err_.str();
}

TEST_F(FollowJobTest, AFailureWithABetterExplanationExitsWithItsCode) {
  // Plain text to a TLS coordinator, say: not "cannot reach" (3) but "not authenticated" (6).
  int asked = 0;
  auto explain = [&asked](const grpc::Status& st) -> std::optional<std::pair<int, std::string>> {
    ++asked;
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
    return std::make_pair(static_cast<int>(kExitUnauthenticated), "not authenticated: no token");
  };
  EXPECT_EQ(Follow(false, explain), kExitUnauthenticated);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(err_.str(), "convoy: watch j-000001: not authenticated: no token\n");
  // Without one, the plain "cannot reach" and 3.
  err_.str("");
  EXPECT_EQ(
      Follow(false,
             [](const grpc::Status&) { return std::optional<std::pair<int, std::string>>(); }),
      kExitUnavailable);
  EXPECT_NE(err_.str().find("cannot reach the coordinator"), std::string::npos) << err_.str();
}

TEST_F(FollowJobTest, AnUnknownJobIsNotRetried) {
  scripts_ = {{{}, grpc::Status(grpc::StatusCode::NOT_FOUND, "job j-000001 not found")}};
  EXPECT_EQ(Follow(/*connected=*/true), kExitNotFound);
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(err_.str(), "convoy: watch j-000001: job j-000001 not found\n");
}

TEST_F(FollowJobTest, ReconnectsAfterACoordinatorRestartAndCarriesOn) {
  scripts_ = {
      {{Snapshot(v1::RUNNING)}, Unavailable()},  // the coordinator went away
      {{}, Unavailable()},                       // still restarting
      {{}, grpc::Status(grpc::StatusCode::CANCELLED, "server shutting down")},
      {{Snapshot(v1::RUNNING), Snapshot(v1::SUCCEEDED)}, grpc::Status::OK},  // back
  };
  EXPECT_EQ(Follow(), 0);
  EXPECT_EQ(calls_, 4);
  EXPECT_EQ(sleeps_, (std::vector<int64_t>{250, 500, 1000})) << "backoff doubles";
  EXPECT_NE(err_.str().find("lost the coordinator (failed to connect to all addresses); "
                            "reconnecting for up to 60 s"),
            std::string::npos)
      << err_.str();
  EXPECT_NE(err_.str().find("convoy: watch j-000001: reconnected\n"), std::string::npos)
      << err_.str();
  // Every update of both calls was shown: the new call's snapshot included.
  const std::string out = out_.str();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;
}

TEST_F(FollowJobTest, AStreamThatEndsBeforeTheJobIsABreakToo) {
  scripts_ = {{{Snapshot(v1::RUNNING)}, grpc::Status::OK},
              {{Snapshot(v1::SUCCEEDED)}, grpc::Status::OK}};
  EXPECT_EQ(Follow(), 0);
  EXPECT_EQ(calls_, 2);
  EXPECT_NE(err_.str().find("the stream ended before the job did"), std::string::npos)
      << err_.str();
}

TEST_F(FollowJobTest, GivesUpWithExitThreeAfterAboutAMinute) {
  scripts_ = {{{Snapshot(v1::RUNNING)}, Unavailable()}};
  const int64_t start = now_;
  EXPECT_EQ(Follow(), kExitUnavailable);
  EXPECT_EQ(now_ - start, 60'000) << "retried for the whole minute, not longer";
  ASSERT_GE(sleeps_.size(), 5u);
  EXPECT_EQ(sleeps_[0], 250);
  EXPECT_EQ(*std::max_element(sleeps_.begin(), sleeps_.end()), 4'000) << "backoff is capped";
  EXPECT_NE(err_.str().find("the coordinator stayed unreachable for 1m00s"), std::string::npos)
      << err_.str();
}

TEST_F(FollowJobTest, SubmitWatchRetriesEvenTheFirstCall) {
  scripts_ = {{{}, Unavailable()}, {{Snapshot(v1::SUCCEEDED)}, grpc::Status::OK}};
  EXPECT_EQ(Follow(/*connected=*/true), 0);
  EXPECT_EQ(calls_, 2);
}

}  // namespace client_watch_test
}  // namespace convoy

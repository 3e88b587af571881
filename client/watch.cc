#include "client/watch.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <thread>

#include "client/format.h"

namespace convoy {
namespace {

bool Terminal(v1::JobState s) {
  return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED;
}

class Display {
 public:
  Display(bool json, bool tty) : json_(json), tty_(tty) {}

  void Update(const v1::WatchJobResponse& u) {
    if (json_) {
      std::cout << ToJson(u) << "\n" << std::flush;
      if (u.has_job()) last_ = u.job();
      return;
    }
    if (u.has_job()) {
      last_ = u.job();
      for (const auto& m : u.job().latest()) ranks_[m.rank()] = m;
    } else if (u.has_event()) {
      Clear();
      const auto& e = u.event();
      std::cout << FormatClock(e.time_unix_ms()) << "  " << StateText(e.to()) << ": " << e.reason()
                << "\n";
      if (e.has_failure() && e.failure().exit().stderr_tail_size() > 0) {
        std::cout << FormatFailure(e.failure(), "    ");
      }
      Draw(true);
    } else if (u.has_metric()) {
      v1::MetricRecord& m = ranks_[u.metric().rank()];
      const v1::MetricRecord old = m;
      m = u.metric();
      // Records of other kinds (eval) keep what they do not carry.
      if (!m.has_loss() && old.has_loss()) {
        m.set_loss(old.loss());
        m.set_has_loss(true);
      }
      for (const auto& [k, v] : old.values()) m.mutable_values()->insert({k, v});
      Draw(false);
    }
  }

  int Finish() {
    if (json_) return last_.state() == v1::SUCCEEDED ? 0 : 1;
    Clear();
    for (const auto& [r, m] : ranks_) std::cout << "  " << FormatRankProgress(m) << "\n";
    std::cout << "job " << last_.id() << " " << StateText(last_.state()) << ": " << last_.message()
              << "\n";
    const double acc = FinalAccuracy(last_);
    if (acc >= 0) std::printf("final test accuracy: %.2f%%\n", acc * 100);
    if (last_.state() == v1::FAILED && last_.attempts_size() > 0) {
      const auto& a = last_.attempts(last_.attempts_size() - 1);
      if (!a.failure().reason().empty()) {
        std::cout << "root cause:\n" << FormatFailure(a.failure(), "  ");
      }
    }
    std::cout << std::flush;
    return last_.state() == v1::SUCCEEDED ? 0 : 1;
  }

  const v1::Job& last() const { return last_; }

 private:
  void Clear() {
    if (tty_ && drawn_ > 0) {
      std::printf("\033[%dA\033[J", drawn_);
      drawn_ = 0;
    }
  }
  void Draw(bool force) {
    const auto now = std::chrono::steady_clock::now();
    const auto interval = tty_ ? std::chrono::milliseconds(200) : std::chrono::seconds(2);
    if (!force && now - last_draw_ < interval) return;
    if (!tty_ && force) return;  // events are printed as they come; progress on schedule
    last_draw_ = now;
    Clear();
    for (const auto& [r, m] : ranks_) {
      std::cout << (tty_ ? "  " : "progress ") << FormatRankProgress(m) << "\n";
      if (tty_) ++drawn_;
    }
    std::cout << std::flush;
  }

  const bool json_;
  const bool tty_;
  v1::Job last_;
  std::map<int, v1::MetricRecord> ranks_;
  int drawn_ = 0;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace

int WatchJob(v1::JobService::Stub& stub, const std::string& id, bool json, bool tty) {
  Display display(json, tty);
  auto broken_since = std::chrono::steady_clock::time_point{};
  for (;;) {
    grpc::ClientContext ctx;
    v1::WatchJobRequest req;
    req.set_job_id(id);
    auto reader = stub.WatchJob(&ctx, req);
    v1::WatchJobResponse update;
    bool got_any = false;
    while (reader->Read(&update)) {
      got_any = true;
      display.Update(update);
    }
    grpc::Status st = reader->Finish();
    if (Terminal(display.last().state())) return display.Finish();
    if (!st.ok() && st.error_code() != grpc::StatusCode::UNAVAILABLE) {
      std::cerr << "convoy: watch " << id << ": " << st.error_message() << "\n";
      return ExitCodeFor(st);
    }
    // The stream broke before the job ended (a coordinator restart, say): reconnect.
    const auto now = std::chrono::steady_clock::now();
    if (got_any || broken_since == std::chrono::steady_clock::time_point{}) broken_since = now;
    if (now - broken_since > std::chrono::seconds(60)) {
      std::cerr << "convoy: watch " << id
                << ": the coordinator is unreachable: " << st.error_message() << "\n";
      return 3;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace convoy

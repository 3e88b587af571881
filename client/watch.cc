#include "client/watch.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "client/format.h"

namespace convoy {
namespace {

// Errors that another call will not mend: give up at once.
bool IsPermanent(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::ALREADY_EXISTS:
      return true;
    default:
      return false;
  }
}

std::string Describe(const grpc::Status& st) {
  if (st.ok()) return "the stream ended before the job did";
  return st.error_message().empty() ? "code " + std::to_string(st.error_code())
                                    : st.error_message();
}

class GrpcWatchCall : public WatchCall {
 public:
  GrpcWatchCall(v1::JobService::Stub& stub, const std::string& id) {
    v1::WatchJobRequest req;
    req.set_job_id(id);
    reader_ = stub.WatchJob(&ctx_, req);
  }
  bool Read(v1::WatchJobResponse* update) override { return reader_->Read(update); }
  grpc::Status Finish() override { return reader_->Finish(); }

 private:
  grpc::ClientContext ctx_;  // outlives reader_
  std::unique_ptr<grpc::ClientReader<v1::WatchJobResponse>> reader_;
};

// While it lives, asks GetJob every `period` why the job waits, as long as the view shows it
// PENDING, and passes the answer to the view. Errors are ignored: the stream reports them.
class WaitingPoller {
 public:
  WaitingPoller(v1::JobService::Stub& stub, const std::string& id, ProgressView& view,
                std::chrono::milliseconds period)
      : stub_(stub), id_(id), view_(view), period_(period), thread_([this] { Run(); }) {}
  ~WaitingPoller() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      if (ctx_ != nullptr) ctx_->TryCancel();
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (cv_.wait_for(lock, period_, [this] { return stop_; })) return;
      if (!view_.Waiting()) continue;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      ctx_ = &ctx;
      lock.unlock();
      v1::GetJobRequest req;
      req.set_job_id(id_);
      v1::Job job;
      const grpc::Status st = stub_.GetJob(&ctx, req, &job);
      if (st.ok()) {
        view_.ShowWaiting(job, std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
      }
      lock.lock();
      ctx_ = nullptr;
    }
  }

  v1::JobService::Stub& stub_;
  const std::string id_;
  ProgressView& view_;
  const std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  grpc::ClientContext* ctx_ = nullptr;  // the GetJob in flight, cancelled by the destructor
  std::thread thread_;                  // last: starts once the rest is ready
};

}  // namespace

int FollowJob(const std::string& id, const std::function<std::unique_ptr<WatchCall>()>& open,
              ProgressView& view, FollowOptions options, std::ostream& err) {
  bool connected = options.connected;
  int64_t broken_since = -1;  // when the stream last broke; -1 while it works
  int64_t backoff = options.first_backoff_ms;
  for (;;) {
    std::unique_ptr<WatchCall> call = open();
    v1::WatchJobResponse update;
    bool got_any = false;
    while (call->Read(&update)) {
      if (!got_any && broken_since >= 0) {
        view.Interrupt();
        err << "convoy: watch " << id << ": reconnected" << std::endl;
      }
      got_any = true;
      connected = true;
      broken_since = -1;
      backoff = options.first_backoff_ms;
      view.Update(update, options.now_ms());
    }
    const grpc::Status st = call->Finish();
    if (view.Finished()) return view.Finish();
    view.Interrupt();
    if (IsPermanent(st.error_code())) {
      err << "convoy: watch " << id << ": " << Describe(st) << std::endl;
      return ExitCodeFor(st);
    }
    const int64_t now = options.now_ms();
    if (!connected) {
      if (options.explain) {
        if (auto better = options.explain(st)) {
          err << "convoy: watch " << id << ": " << better->second << std::endl;
          return better->first;
        }
      }
      err << "convoy: watch " << id << ": cannot reach the coordinator: " << Describe(st)
          << std::endl;
      return kExitUnavailable;
    }
    if (broken_since < 0) {
      broken_since = now;
      err << "convoy: watch " << id << ": lost the coordinator (" << Describe(st)
          << "); reconnecting for up to " << options.reconnect_for_ms / 1000 << " s" << std::endl;
    }
    if (now - broken_since >= options.reconnect_for_ms) {
      err << "convoy: watch " << id << ": the coordinator stayed unreachable for "
          << FormatDuration(now - broken_since) << ": " << Describe(st) << std::endl;
      return kExitUnavailable;
    }
    options.wait_ms(std::min(backoff, broken_since + options.reconnect_for_ms - now));
    backoff = std::min(backoff * 2, options.max_backoff_ms);
  }
}

int WatchJob(v1::JobService::Stub* stub, grpc::Channel* channel, const std::string& id,
             ProgressView& view, bool connected, std::ostream& err,
             ConnectFailureExplainer explain) {
  FollowOptions options;
  options.connected = connected;
  options.explain = std::move(explain);
  options.now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  options.wait_ms = [channel, first = options.first_backoff_ms](int64_t ms) {
    // A short pause always (the coordinator may be reachable but refusing), then until the
    // channel connects again or the backoff is over, whichever is first.
    const int64_t pause = std::min(ms, first);
    std::this_thread::sleep_for(std::chrono::milliseconds(pause));
    if (ms > pause) {
      channel->WaitForConnected(std::chrono::system_clock::now() +
                                std::chrono::milliseconds(ms - pause));
    }
  };
  WaitingPoller poller(*stub, id, view, std::chrono::milliseconds(2000));
  return FollowJob(
      id,
      [stub, &id]() -> std::unique_ptr<WatchCall> {
        return std::make_unique<GrpcWatchCall>(*stub, id);
      },
      view, std::move(options), err);
}

}  // namespace convoy

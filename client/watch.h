// `convoy watch`: follows a job's WatchJob stream into a ProgressView until the job ends.
// When the stream breaks before that (a coordinator restart, say), it calls again with
// backoff for up to a minute; each new call starts with a fresh snapshot.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include "client/progress.h"
#include "convoy/v1/job.grpc.pb.h"

namespace convoy {

// A better explanation of a failure to reach the coordinator than "cannot reach it" (an
// untrusted certificate, plain text to a TLS coordinator): the exit code and the message,
// or nullopt. ExplainConnectFailure (commands.h) is the real one.
using ConnectFailureExplainer =
    std::function<std::optional<std::pair<int, std::string>>(const grpc::Status&)>;

// One WatchJob call (the gRPC one, or a fake in tests).
class WatchCall {
 public:
  virtual ~WatchCall() = default;
  // The next update; false at the end of the stream.
  virtual bool Read(v1::WatchJobResponse* update) = 0;
  // The status of the ended stream.
  virtual grpc::Status Finish() = 0;
};

struct FollowOptions {
  // True when the coordinator has already answered (submit --watch): a first call that
  // fails is then retried too. Otherwise an unreachable coordinator ends the watch at once.
  bool connected = false;
  int64_t reconnect_for_ms = 60'000;
  int64_t first_backoff_ms = 250;
  int64_t max_backoff_ms = 4'000;
  // Unix time in ms, and the pause before the next call: at most `ms`, less when the
  // coordinator is known to be back (both replaced in tests).
  std::function<int64_t()> now_ms;
  std::function<void(int64_t ms)> wait_ms;
  // Consulted when the first call fails and the coordinator was never reached; may be empty.
  ConnectFailureExplainer explain;
};

// Follows job `id` until it ends, with calls made by `open`. Errors go to `err`, prefixed
// "convoy: ". Returns the view's exit code when the job ended (0 iff SUCCEEDED, else 1),
// kExitUnavailable when the coordinator stayed unreachable, or ExitCodeFor the call's
// status on another error (NOT_FOUND: 4).
int FollowJob(const std::string& id, const std::function<std::unique_ptr<WatchCall>()>& open,
              ProgressView& view, FollowOptions options, std::ostream& err);

// FollowJob over real WatchJob calls on `stub`, whose `channel` tells when a broken
// connection is back. While the job is PENDING, a GetJob every 2 s feeds the view why it
// waits (ProgressView::ShowWaiting), which the stream does not send until the state changes.
int WatchJob(v1::JobService::Stub* stub, grpc::Channel* channel, const std::string& id,
             ProgressView& view, bool connected, std::ostream& err,
             ConnectFailureExplainer explain = nullptr);

}  // namespace convoy

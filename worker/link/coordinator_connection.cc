#include "worker/link/coordinator_connection.h"

#include "worker/link/code_fetch.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <random>
#include <thread>

#include "common/util.h"

namespace convoy {
namespace {

// The first retry comes after 250-500 ms; then the wait doubles up to 10 s, with full jitter
// over its upper half, so that 10,000 workers that lost the same coordinator come back spread
// over seconds instead of all in the same millisecond (and again, and again).
constexpr int kInitialBackoffMs = 500;
constexpr int kMaxBackoffMs = 10000;
// How long one connection attempt may take. gRPC 1.51 uses GRPC_ARG_MIN_RECONNECT_BACKOFF_MS
// as the floor of every connect deadline (subchannel: deadline = max(next backoff, now + min
// connect timeout)): at 100 ms, handshakes slower than that under load were abandoned and
// redialled, and the abandoned sockets piled up on the coordinator (FACTS.md).
constexpr int kConnectTimeoutMs = 20000;
// A stream that lived this long was healthy: the next reconnect starts from the shortest
// backoff again.
constexpr auto kHealthyStream = std::chrono::seconds(5);

}  // namespace

CoordinatorConnection::CoordinatorConnection(const std::string& target,
                                             WorkerCredentials* credentials, ReportQueue& reports,
                                             LinkListener& listener, std::string work_dir)
    : coordinators_(target),
      credentials_(credentials),
      reports_(reports),
      listener_(listener),
      work_dir_(std::move(work_dir)) {
  Dial();
}

void CoordinatorConnection::Dial() {
  grpc::ChannelArguments args;
  // Detect a dead coordinator (or a cut link) within seconds, not at the next write.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // gRPC's own reconnection backoff stays at or below ours, so that ours decides the pace;
  // the min backoff is the connect timeout (see kConnectTimeoutMs).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kInitialBackoffMs);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kConnectTimeoutMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxBackoffMs);
  args.SetMaxReceiveMessageSize(16 * 1024 * 1024);
  args.SetMaxSendMessageSize(16 * 1024 * 1024);
  // Several coordinators: subchannels of this channel's own (Run dials afresh each attempt).
  if (coordinators_.size() > 1) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> creds = credentials_ != nullptr
                                                        ? credentials_->Current(&generation_)
                                                        : grpc::InsecureChannelCredentials();
  channel_ = grpc::CreateCustomChannel(coordinators_.current(), creds, args);
  stub_ = v1::WorkerService::NewStub(channel_);
}

void CoordinatorConnection::Shutdown() {
  MutexLock lock(mu_);
  stopping_ = true;
  if (context_ != nullptr) context_->TryCancel();
  wake_.SignalAll();
}

void CoordinatorConnection::SleepMs(int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  MutexLock lock(mu_);
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) break;
    wake_.WaitFor(mu_, until - now);
  }
}

void CoordinatorConnection::Run() {
  std::mt19937 rng(std::random_device{}());
  int backoff_ms = kInitialBackoffMs;
  while (!stopping_) {
    const auto began = std::chrono::steady_clock::now();
    // A renewed certificate is used from the next connection on.
    uint64_t generation = generation_;
    if (credentials_ != nullptr) credentials_->Current(&generation);
    // With several coordinators (one leads), a fresh channel per attempt, to the one whose
    // turn it is.
    if (generation != generation_ || coordinators_.size() > 1) Dial();
    Serve();
    if (stopping_) break;
    if (std::chrono::steady_clock::now() - began > kHealthyStream) {
      backoff_ms = kInitialBackoffMs;
      coordinators_.MarkGood();
    }
    // The next coordinator at once while some of this round are untried (a follower refuses
    // at once); a little jitter spreads 10,000 workers over the next one.
    if (coordinators_.size() > 1 && !coordinators_.Next()) {
      SleepMs(static_cast<int>(rng() % 100));
      continue;
    }
    // Full jitter over the upper half: workers that lost the same coordinator do not all
    // come back in the same millisecond.
    const int sleep_ms = backoff_ms / 2 + static_cast<int>(rng() % (backoff_ms / 2 + 1));
    SleepMs(sleep_ms);
    backoff_ms = std::min(backoff_ms * 2, kMaxBackoffMs);
  }
}

void CoordinatorConnection::Serve() {
  grpc::ClientContext context;
  // Fail fast while the coordinator is down; our backoff paces the retries.
  context.set_wait_for_ready(false);
  auto stream = stub_->Connect(&context);
  // Built before taking mu_ (no lock is held while another is taken).
  v1::WorkerMessage reg;
  *reg.mutable_register_() = listener_.BuildRegister();
  {
    MutexLock lock(mu_);
    if (stopping_) {
      context.TryCancel();
      stream->Finish();
      return;
    }
    context_ = &context;
  }
  v1::CoordinatorMessage msg;
  bool ok = false;
  std::thread writer;
  {
    // Nobody else writes until the queue opens, so this write needs no lock.
    ok = stream->Write(reg);
  }
  if (ok && stream->Read(&msg)) {
    if (msg.has_register_ack()) {
      reports_.Open();
      // The writer: the only thread that writes from now on, so a write that waits on flow
      // control holds nobody's lock.
      writer = std::thread([this, s = stream.get(), ctx = &context] {
        v1::WorkerMessage next;
        while (reports_.Next(&next)) {
          if (!s->Write(next)) {
            ctx->TryCancel();  // the read loop ends too
            return;
          }
        }
      });
      coordinators_.MarkGood();
      spdlog::info("registered with the coordinator at {} ({} attempt(s) reported)",
                   coordinators_.current(), reg.register_().attempts_size());
      const auto& stale = msg.register_ack().stale_snapshot_keys();
      listener_.OnConnected(msg.register_ack().heartbeat_interval_ms(),
                            std::vector<std::string>(stale.begin(), stale.end()));
      while (stream->Read(&msg)) {
        // A Launch that ships code: fetch it first (the supervisor only reads the cache).
        if (msg.has_launch() && !msg.launch().spec().code_sha256().empty()) {
          const std::string& sha = msg.launch().spec().code_sha256();
          Status fetched = FetchCodeArchive(*stub_, work_dir_, sha);
          if (!fetched.ok()) spdlog::error("code archive {}: {}", sha, fetched.message());
        }
        listener_.Post(msg);
      }
    } else {
      spdlog::error("the coordinator at {} answered Register with message case {}, not an ack",
                    coordinators_.current(), static_cast<int>(msg.msg_case()));
    }
  }
  const bool was_registered = reports_.open();
  reports_.Close();
  {
    MutexLock lock(mu_);
    context_ = nullptr;
  }
  context.TryCancel();  // unblocks a write that waits on flow control
  if (writer.joinable()) writer.join();
  if (was_registered) listener_.OnDisconnected();
  context.TryCancel();
  const grpc::Status st = stream->Finish();
  if (stopping_) return;
  if (was_registered) {
    failures_ = 0;
    spdlog::warn("lost the coordinator at {}: {}; reconnecting", coordinators_.current(),
                 st.ok() ? "stream closed" : st.error_message());
  } else {
    // The first failure in a row is a warning, the retries that follow are debug noise.
    spdlog::log(failures_++ == 0 ? spdlog::level::warn : spdlog::level::debug,
                "cannot register with the coordinator at {}: {}", coordinators_.current(),
                st.ok() ? "stream closed" : st.error_message());
  }
}

}  // namespace convoy

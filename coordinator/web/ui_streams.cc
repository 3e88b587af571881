#include "coordinator/web/ui_streams.h"

#include <spdlog/spdlog.h>

#include <functional>
#include <vector>

#include "coordinator/control/log_follower.h"
#include "coordinator/web/ui_api.h"

namespace convoy {
namespace {

// A log is read from its worker this many bytes at a time (a page's event stays small).
constexpr int kLogChunk = 64 * 1024;
constexpr uint64_t kClosed = ~uint64_t{0};

HttpResponse EventStreamHead() {
  HttpResponse head;
  head.content_type = "text/event-stream; charset=utf-8";
  head.headers.emplace_back("Cache-Control", "no-store");
  // A reconnect after a dropped stream waits 3 s (the browser's EventSource does it).
  head.body = "retry: 3000\n\n";
  return head;
}

void EndWith(const std::shared_ptr<HttpExchange>& ex, const std::string& why) {
  ex->Send(SseEvent("stop", "{\"error\":" + JsonQuote(why) + "}"));
  ex->End();
}

// One rank's log, chunk after chunk (a LogFollower, as JobService.GetLogs), as events.
class LogPump : public std::enable_shared_from_this<LogPump>, public LogFollower::Sink {
 public:
  LogPump(Coordinator& coordinator, std::shared_ptr<HttpExchange> ex, LogFollower::Options o)
      : ex_(std::move(ex)), follower_(coordinator, std::move(o), this) {}

  void Start() { follower_.Start(weak_from_this()); }

 private:
  bool Open() const override { return !ex_->closed(); }
  After OnChunk(int attempt, std::string data, bool last) override {
    const std::string chunk =
        "{\"attempt\":" + std::to_string(attempt) + ",\"data\":" + JsonQuote(data) + "}";
    return ex_->Send(SseEvent("log", chunk)) ? After::kNext : After::kStop;
  }
  void OnEnd(const Status& status) override {
    if (!status.ok()) return EndWith(ex_, status.message());
    ex_->Send(SseEvent("end", "{}"));
    ex_->End();
  }

  const std::shared_ptr<HttpExchange> ex_;
  LogFollower follower_;
};

}  // namespace

std::string SseEvent(const std::string& name, const std::string& data) {
  return "event: " + name + "\ndata: " + data + "\n\n";
}

// ---- ClusterFeed

void ClusterFeed::Update(const Coordinator::ExportSnapshot& snap) {
  // What the list pages show; not the heartbeats or metrics, which move every second.
  std::string s;
  for (const auto& [state, n] : snap.stats.jobs) {
    s += std::to_string(state) + "=" + std::to_string(n) + ";";
  }
  for (const v1::Job& j : snap.active) {
    s += j.id() + ":" + std::to_string(j.state()) + ":" + std::to_string(j.queue_position()) + ":" +
         std::to_string(j.attempt()) + ":" + j.pending_reason() + ";";
  }
  for (const v1::Job& j : snap.finished) s += j.id() + "!" + std::to_string(j.state()) + ";";
  for (const v1::WorkerInfo& w : snap.workers) {
    s += w.name() + ":" + std::to_string(w.state()) + ":" + std::to_string(w.used_slots()) + ":" +
         std::to_string(w.slots()) + ":" + (w.drained() ? "d" : "") + ":" +
         std::to_string(w.jobs_size()) + ";";
  }
  const size_t signature = std::hash<std::string>()(s);
  std::vector<std::function<void(uint64_t)>> notify;
  uint64_t version;
  {
    MutexLock lock(mu_);
    if (signature == signature_ && snap.finished.empty()) return;
    signature_ = signature;
    version = ++version_;
    for (const auto& [id, fn] : subscribers_) notify.push_back(fn);
  }
  for (const auto& fn : notify) fn(version);
}

uint64_t ClusterFeed::Subscribe(std::function<void(uint64_t)> fn) {
  MutexLock lock(mu_);
  const uint64_t id = next_id_++;
  subscribers_[id] = std::move(fn);
  return id;
}

void ClusterFeed::Unsubscribe(uint64_t id) {
  MutexLock lock(mu_);
  subscribers_.erase(id);
}

uint64_t ClusterFeed::version() {
  MutexLock lock(mu_);
  return version_;
}

// ---- UiStreams

bool UiStreams::Begin(const UiCaller& caller, const std::shared_ptr<HttpExchange>& ex,
                      std::function<void()> cleanup) {
  auto slot = auth_.AcquireStream(caller.who);
  if (!slot.ok()) {
    ex->Respond(HttpResponse::Error(HttpStatusOf(slot.status().code()), slot.status().message()));
    return false;
  }
  ex->StartStream(EventStreamHead(), ": keep-alive\n\n");
  std::weak_ptr<HttpExchange> weak = ex;
  const std::string token_id = caller.who.token_id;
  auth_.OnRevoked(*slot, [weak, token_id] {
    if (auto e = weak.lock()) EndWith(e, "token " + token_id + " was revoked or expired");
  });
  uint64_t id;
  {
    MutexLock lock(mu_);
    id = next_stream_++;
    streams_[id] = Open{caller.session_key, [weak] {
                          if (auto e = weak.lock()) EndWith(e, "the session ended");
                        }};
  }
  // The slot goes back to the token's quota when the stream is over.
  ex->OnClose([this, id, held = *slot, cleanup = std::move(cleanup)] {
    (void)held;
    {
      MutexLock lock(mu_);
      streams_.erase(id);
    }
    if (cleanup) cleanup();
  });
  return true;
}

void UiStreams::EndSession(const std::string& session_key) {
  if (session_key.empty()) return;
  std::vector<std::function<void()>> ends;
  {
    MutexLock lock(mu_);
    for (const auto& [id, open] : streams_) {
      if (open.session_key == session_key) ends.push_back(open.end);
    }
  }
  for (const auto& end : ends) end();
}

size_t UiStreams::open() {
  MutexLock lock(mu_);
  return streams_.size();
}

void UiStreams::Cluster(const UiCaller& caller, const std::shared_ptr<HttpExchange>& ex) {
  auto sub = std::make_shared<std::atomic<uint64_t>>(0);
  ClusterFeed* feed = &feed_;
  if (!Begin(caller, ex, [feed, sub] {
        const uint64_t id = sub->exchange(kClosed);
        if (id != 0 && id != kClosed) feed->Unsubscribe(id);
      })) {
    return;
  }
  std::weak_ptr<HttpExchange> weak = ex;
  ex->Send(SseEvent("changed", "{\"version\":" + std::to_string(feed_.version()) + "}"));
  const uint64_t id = feed_.Subscribe([weak](uint64_t version) {
    if (auto e = weak.lock()) {
      e->Send(SseEvent("changed", "{\"version\":" + std::to_string(version) + "}"));
    }
  });
  uint64_t expected = 0;
  if (!sub->compare_exchange_strong(expected, id)) feed_.Unsubscribe(id);  // closed meanwhile
}

void UiStreams::Job(const UiCaller& caller, const std::string& job_id,
                    const std::shared_ptr<HttpExchange>& ex) {
  auto job = coordinator_.Get(job_id);
  if (!job.ok()) {
    ex->Respond(HttpResponse::Error(HttpStatusOf(job.status().code()), job.status().message()));
    return;
  }
  auto watch = std::make_shared<std::atomic<uint64_t>>(0);
  Coordinator* coordinator = &coordinator_;
  if (!Begin(caller, ex, [coordinator, watch] {
        const uint64_t id = watch->exchange(kClosed);
        if (id != 0 && id != kClosed) coordinator->Unwatch(id);
      })) {
    return;
  }
  // Updates come one at a time from the commit thread; the job (the first update, and every
  // state change) says whose it is, for the events between (as WatchJob redacts).
  auto owner = std::make_shared<std::string>(job->owner());
  const Principal who = caller.who;
  std::shared_ptr<HttpExchange> out = ex;
  auto id =
      coordinator_.Watch(job_id, [out, who, owner](const v1::WatchJobResponse& given, bool done) {
        if (given.has_job()) {
          *owner = given.job().owner();
          v1::Job copy = given.job();
          Authorizer::Redact(who, &copy);
          out->Send(SseEvent("job", ProtoJson(copy)));
        } else if (given.has_event()) {
          v1::JobEvent copy = given.event();
          Authorizer::Redact(who, *owner, &copy);
          out->Send(SseEvent("event", ProtoJson(copy)));
        } else if (given.has_metric()) {
          out->Send(SseEvent("metric", ProtoJson(given.metric())));
        }
        if (done) {
          out->Send(SseEvent("end", "{}"));
          out->End();
        }
      });
  if (!id.ok()) return EndWith(ex, id.status().message());
  uint64_t expected = 0;
  if (!watch->compare_exchange_strong(expected, *id)) coordinator_.Unwatch(*id);
}

void UiStreams::Logs(const UiCaller& caller, const std::string& job_id, int rank, int attempt,
                     bool follow, int64_t tail_bytes, const std::shared_ptr<HttpExchange>& ex) {
  auto pump = std::make_shared<LogPump>(
      coordinator_, ex, LogFollower::Options{job_id, rank, attempt, follow, tail_bytes, kLogChunk});
  // The pump lives as long as the stream: its asks to the worker hold it weakly.
  if (!Begin(caller, ex, [pump] {})) return;
  pump->Start();
}

}  // namespace convoy

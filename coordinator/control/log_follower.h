// One rank's log followed through the coordinator (Coordinator::RequestLogs), chunk by chunk:
// what every reader that streams a log shares, JobService.GetLogs
// (coordinator/rpc/job_service_streams.cc) and the web UI's log stream
// (coordinator/web/ui_streams.cc). It keeps the attempt and the offset, asks the worker for
// the next chunk, decides when the log has ended, and turns a refusal into its Status; how a
// chunk travels, and when the next one is asked for, is the reader's (its Sink).
//
// With `follow`, an ask that found nothing new waits on the worker (kFollowWaitMs) for new
// bytes, so nothing polls. The log ends after a chunk shorter than chunk_bytes when: not
// following; the rank exited and its log was read to the end (LogData.eof); or the job had
// finished when the last ask was made and nothing new came.
//
// Lifetime: the follower is a member of its reader, which is owned by a shared_ptr; the
// asks in flight hold that owner weakly (the `anchor` given to Start), so an answer that
// arrives after the reader is gone is dropped.
// Threading: Start and Next from any thread; the sink's calls come on the Coordinator's
// commit thread (answers) or on the caller of Start/Next (an ask refused at once), never
// with the follower's lock held.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "common/status.h"
#include "coordinator/control/coordinator.h"

namespace convoy {

class LogFollower {
 public:
  // How long the worker holds a follow ask with nothing new to say.
  static constexpr int kFollowWaitMs = 10000;

  struct Options {
    std::string job_id;
    int rank = 0;
    int attempt = -1;  // -1: the latest
    bool follow = false;
    int64_t tail_bytes = 0;  // only the last this many bytes (0: the whole log)
    int chunk_bytes = 256 * 1024;
  };

  class Sink {
   public:
    // What the follower does after a chunk: ask for the next at once, wait until the reader
    // calls Next() (it writes the chunk first), or stop (the reader is gone).
    enum class After { kNext, kReaderAsks, kStop };
    virtual ~Sink() = default;
    // False once the reader is closed: no more asks are made.
    virtual bool Open() const { return true; }
    // Bytes of `attempt`; `last`: the log ends after them (OnEnd follows).
    virtual After OnChunk(int attempt, std::string data, bool last) = 0;
    // The end: OK, or why the log cannot be read (NotFound: no such job, rank or log;
    // FailedPrecondition: the worker removed it; what the first ask was refused with).
    virtual void OnEnd(const Status& status) = 0;
  };

  LogFollower(Coordinator& coordinator, Options options, Sink* sink)
      : coordinator_(coordinator),
        options_(std::move(options)),
        sink_(sink),
        offset_(options_.tail_bytes > 0 ? -options_.tail_bytes : 0),
        attempt_(options_.attempt) {}

  // Asks for the first chunk; `anchor` owns the reader (and so this follower).
  void Start(std::weak_ptr<void> anchor) EXCLUDES(mu_);
  // Asks for the next chunk. wait: the last answer had nothing new.
  void Next(bool wait = false) EXCLUDES(mu_);

 private:
  void OnData(const StatusOr<v1::LogData>& data) EXCLUDES(mu_);

  Coordinator& coordinator_;
  const Options options_;
  Sink* const sink_;
  Mutex mu_;
  std::weak_ptr<void> anchor_ GUARDED_BY(mu_);
  int64_t offset_ GUARDED_BY(mu_);
  int attempt_ GUARDED_BY(mu_);
  bool first_ GUARDED_BY(mu_) = true;
  bool job_finished_ GUARDED_BY(mu_) = false;
};

}  // namespace convoy

// The worker stream table: each connected worker's one open stream, by name. The Coordinator
// binds a stream when its worker registers and unbinds it when it ends; the StreamChannel
// looks a worker's stream up to bind a message to it; the JoinService asks whether a name is
// connected. The rules of a stream's life are here: a newer stream of a name replaces the
// older one (which the caller then closes), and an older stream's end is no news about the
// worker, which is on the newer one.
//
// Threading: every method may be called from any thread (a mutex of its own, taken after
// the Coordinator's state lock). The Coordinator changes the table only inside its locked
// sections, so what a section decides about a worker sees the table as it leaves it; a read
// from elsewhere (Connected, size) is a moment's view. No method calls into a stream.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "convoy/v1/worker.pb.h"

namespace convoy {

// One worker's open stream, as the Coordinator sees it (the gRPC reactor implements it;
// tests may fake it).
class WorkerStream {
 public:
  virtual ~WorkerStream() = default;
  // Queues `msg` for the worker; false when the stream is closed, or over its bound (then
  // the stream is dropped with a log line). Never blocks. Called on the commit thread.
  virtual bool Enqueue(const v1::CoordinatorMessage& msg) = 0;
  // Ends the stream (replaced by a newer one of the same worker, or shutdown). Idempotent;
  // never blocks. Called on the commit thread or at shutdown, never with the state lock.
  virtual void Close(const std::string& why) = 0;
};

class WorkerStreamTable {
 public:
  // Makes `stream` the worker's stream. Returns the stream it replaced (for the caller to
  // close, outside the state lock), or null when there was none or it was this one.
  std::shared_ptr<WorkerStream> Bind(const std::string& name, std::shared_ptr<WorkerStream> stream)
      EXCLUDES(mu_);
  // Removes the worker's stream when it is still `stream`: true. False (nothing changed) when
  // the worker has none or a newer one.
  bool Unbind(const std::string& name, const WorkerStream* stream) EXCLUDES(mu_);
  // Removes the worker's stream, whichever it is, and returns it (null: none), for the caller
  // to close: a worker declared lost must register again.
  std::shared_ptr<WorkerStream> Drop(const std::string& name) EXCLUDES(mu_);
  // The worker's stream, or null.
  std::shared_ptr<WorkerStream> Find(const std::string& name) const EXCLUDES(mu_);
  // Empties the table and returns every stream (shutdown: the caller closes them).
  std::map<std::string, std::shared_ptr<WorkerStream>> TakeAll() EXCLUDES(mu_);

  // Whether a worker of this name has its stream open now.
  bool Connected(const std::string& name) const EXCLUDES(mu_);
  // Open streams.
  size_t size() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<WorkerStream>> streams_ GUARDED_BY(mu_);
};

}  // namespace convoy

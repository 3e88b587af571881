// The watch hub: who watches which job (WatchJob streams), and the delivery of each update to
// them. One of the JobManager's controllers: it keeps no job state, only the subscriptions.
//
// Threading: none of its own; the JobManager calls it with the Coordinator's lock held, and
// the callbacks run there (they must only enqueue).
// Cost: Add, Remove and Close are O(log watches); Notify is O(that job's watchers).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "convoy/v1/job.pb.h"

namespace convoy {

class WatchHub {
 public:
  // `update` is an event, a metric or a new snapshot of the job; `done` is true once, with
  // the job's final snapshot, after which the callback is never called again.
  using WatchFn = std::function<void(const v1::WatchJobResponse& update, bool done)>;

  // Subscribes `fn` to job `job_id`; returns the watch's id (never 0, never reused).
  uint64_t Add(const std::string& job_id, WatchFn fn);
  // Unsubscribes; an unknown or closed id is ignored.
  void Remove(uint64_t watch_id);
  // Calls every watcher of the job with `update` (done = false).
  void Notify(const std::string& job_id, const v1::WatchJobResponse& update);
  // The job ended: calls every watcher once more with `final_update` and done = true, then
  // forgets them.
  void Close(const std::string& job_id, const v1::WatchJobResponse& final_update);
  // Allocates a watch id without subscribing (a watch of a job that already ended).
  uint64_t NextId() { return next_id_++; }

  size_t watches() const { return owner_.size(); }
  size_t watchers_of(const std::string& job_id) const;

 private:
  uint64_t next_id_ = 1;
  std::map<std::string, std::map<uint64_t, WatchFn>> by_job_;
  std::map<uint64_t, std::string> owner_;  // watch id -> job id
};

}  // namespace convoy

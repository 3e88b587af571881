#include "coordinator/control/commit_pipeline.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace convoy {

CommitPipeline::CommitPipeline(JobStore& durable, Options options)
    : durable_(durable), options_(std::move(options)) {}

CommitPipeline::~CommitPipeline() { Stop(); }

void CommitPipeline::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void CommitPipeline::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    work_cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void CommitPipeline::Queue(Effects effects) {
  if (effects.empty()) return;
  MutexLock lock(mu_);
  queue_.push_back(std::move(effects));
  ++queued_;
  work_cv_.Signal();
}

bool CommitPipeline::Idle() {
  MutexLock lock(mu_);
  return done_ == queued_;
}

void CommitPipeline::Flush() {
  MutexLock lock(mu_);
  const uint64_t target = queued_;
  while (done_ < target && !stopping_ && !store_lost_) flushed_cv_.Wait(mu_);
}

Status CommitPipeline::AcceptsWrites() {
  MutexLock lock(mu_);
  if (store_refusing_.empty()) return Status::Ok();
  return Status::Unavailable("the coordinator's store refuses writes now (" + store_refusing_ +
                             "); nothing was changed: retry once it is back");
}

void CommitPipeline::Loop() {
  for (;;) {
    std::deque<Effects> batch;
    {
      MutexLock lock(mu_);
      while (queue_.empty() && !stopping_) work_cv_.Wait(mu_);
      if (queue_.empty() && stopping_) return;
      batch.swap(queue_);
    }
    std::vector<StoreWrite> writes;
    for (Effects& e : batch) {
      for (StoreWrite& w : e.writes) writes.push_back(std::move(w));
    }
    if (!writes.empty() && !Persist(writes)) return;
    for (Effects& e : batch) {
      for (auto& [stream, msg] : e.sends) stream->Enqueue(msg);
      for (auto& fn : e.after) fn();
    }
    MutexLock lock(mu_);
    done_ += batch.size();
    flushed_cv_.SignalAll();
  }
}

bool CommitPipeline::Persist(std::vector<StoreWrite>& writes) {
  using Steady = std::chrono::steady_clock;
  int failures = 0;
  const Steady::time_point first = Steady::now();
  for (;;) {
    // Real elapsed time for the store-latency histogram; no decision depends on it.
    const Steady::time_point began = Steady::now();
    Status st = durable_.Write(writes);
    if (!st.ok() || failures > 0) {  // the common case, a first write that worked, locks nothing
      MutexLock lock(mu_);
      store_refusing_ = st.ok() ? "" : st.message();
    }
    if (st.ok()) {
      if (failures > 0) {
        spdlog::info(
            "the store accepts writes again ({} change(s) persisted after {} ms)", writes.size(),
            std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - first).count());
      }
      if (on_commit_) {
        on_commit_(std::chrono::duration<double>(Steady::now() - began).count(), writes.size());
      }
      return true;
    }
    const int64_t failing_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - first).count();
    if (failing_ms >= options_.store_give_up_ms) {
      const std::string why = fmt::format(
          "the durable store has failed for {} ms ({} change(s) not persisted): {}; stopping "
          "the coordinator (crash-only: restarted, it resumes from what was persisted)",
          failing_ms, writes.size(), st.message());
      if (!options_.on_store_lost) {
        spdlog::critical("{}", why);
        spdlog::default_logger()->flush();
        std::_Exit(1);
      }
      options_.on_store_lost(why);
      MutexLock lock(mu_);
      store_lost_ = true;  // Flush returns from here on
      flushed_cv_.SignalAll();
      return false;
    }
    if (failures++ % 30 == 0) {
      spdlog::error(
          "cannot persist {} change(s): {}; holding their messages and replies, retrying "
          "every second (giving up after {} s)",
          writes.size(), st.message(), options_.store_give_up_ms / 1000);
    }
    MutexLock lock(mu_);
    if (stopping_) {
      spdlog::error("shutting down with {} change(s) not persisted", writes.size());
      return false;
    }
    work_cv_.WaitFor(mu_, std::chrono::milliseconds(
                              std::min<int64_t>(1000, options_.store_give_up_ms - failing_ms)));
  }
}

}  // namespace convoy

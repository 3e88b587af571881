// The coordinator's ticker: a thread that runs `tick` every tick_ms (the Coordinator advances
// its timeouts: JobManager::Tick) and, after a tick, `on_export` once export_interval_ms has
// passed on the clock since the last export (the metrics exporter's snapshot). It counts the
// ticks it completed: the systemd watchdog's proof of life.
//
// Threading: `tick` and `on_export` run on the ticker's thread with no lock of the ticker's
// held (they take the state lock themselves). ticks() may be called from any thread; Start
// and Stop from the owner's.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "common/clock.h"
#include "common/mutex.h"

namespace convoy {

class Ticker {
 public:
  struct Options {
    int64_t tick_ms = 50;
    int64_t export_interval_ms = 1000;
  };
  // `on_export` may be empty (no exporter). `clock` outlives the ticker.
  Ticker(const Clock& clock, Options options, std::function<void()> tick,
         std::function<void()> on_export);
  // Stop.
  ~Ticker();
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

  // Starts the thread; the first tick comes tick_ms later, the first export with it. Once.
  void Start();
  // Stops the thread after the tick in progress, if any; no tick starts after it returns.
  // Idempotent.
  void Stop() EXCLUDES(mu_);
  // Ticks completed so far.
  uint64_t ticks() const { return ticks_.load(std::memory_order_relaxed); }

 private:
  void Loop() EXCLUDES(mu_);

  const Clock& clock_;
  const Options options_;
  const std::function<void()> tick_;
  const std::function<void()> on_export_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> ticks_{0};
  std::thread thread_;
};

}  // namespace convoy

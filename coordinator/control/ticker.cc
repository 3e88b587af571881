#include "coordinator/control/ticker.h"

#include <chrono>
#include <utility>

namespace convoy {

Ticker::Ticker(const Clock& clock, Options options, std::function<void()> tick,
               std::function<void()> on_export)
    : clock_(clock), options_(options), tick_(std::move(tick)), on_export_(std::move(on_export)) {}

Ticker::~Ticker() { Stop(); }

void Ticker::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Ticker::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void Ticker::Loop() {
  int64_t next_export = clock_.NowMonotonicMs();
  for (;;) {
    {
      MutexLock lock(mu_);
      if (stop_) return;
      cv_.WaitFor(mu_, std::chrono::milliseconds(options_.tick_ms));
      if (stop_) return;
    }
    tick_();
    ticks_.fetch_add(1, std::memory_order_relaxed);
    if (on_export_ && clock_.NowMonotonicMs() >= next_export) {
      next_export = clock_.NowMonotonicMs() + options_.export_interval_ms;
      on_export_();
    }
  }
}

}  // namespace convoy

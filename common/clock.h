// Time is injected: every timeout (heartbeat, rendezvous, hang, kill grace) reads a Clock,
// so that unit tests advance a FakeClock instead of sleeping (after Ray's util/clock.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace convoy {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch (wall time, for records shown to people).
  virtual int64_t NowUnixMs() const = 0;
  // Milliseconds on a monotonic clock (for timeouts).
  virtual int64_t NowMonotonicMs() const = 0;
};

class SystemClock : public Clock {
 public:
  int64_t NowUnixMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t NowMonotonicMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// Starts at a fixed time; only AdvanceMs moves it. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_unix_ms = 1'700'000'000'000) : unix_ms_(start_unix_ms) {}
  int64_t NowUnixMs() const override { return unix_ms_.load(); }
  int64_t NowMonotonicMs() const override { return mono_ms_.load(); }
  void AdvanceMs(int64_t ms) {
    unix_ms_ += ms;
    mono_ms_ += ms;
  }
  // The wall clock alone steps (NTP): no time passes.
  void StepWallMs(int64_t ms) { unix_ms_ += ms; }

 private:
  std::atomic<int64_t> unix_ms_;
  std::atomic<int64_t> mono_ms_{1'000'000};
};

}  // namespace convoy

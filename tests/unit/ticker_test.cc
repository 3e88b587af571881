// The coordinator's ticker, on a fake clock: it ticks and counts its ticks, exports once the
// export interval has passed on the clock (not on every tick), and no tick starts after Stop.
#include "coordinator/control/ticker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace convoy {
namespace ticker_test {

using namespace std::chrono_literals;

template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 3000 && !done(); ++i) std::this_thread::sleep_for(5ms);
  return done();
}

TEST(TickerTest, ItTicksAndCountsItsTicks) {
  FakeClock clock;
  std::atomic<int> ticked{0};
  Ticker ticker(
      clock, {1, 1000}, [&] { ++ticked; }, nullptr);
  EXPECT_EQ(ticker.ticks(), 0u);
  ticker.Start();
  ASSERT_TRUE(Eventually([&] { return ticker.ticks() >= 3; }));
  ticker.Stop();
  EXPECT_EQ(ticker.ticks(), static_cast<uint64_t>(ticked.load()));
}

TEST(TickerTest, ItExportsOncePerIntervalOnTheClock) {
  FakeClock clock;
  std::atomic<int> exported{0};
  Ticker ticker(
      clock, {1, 1000}, [] {}, [&] { ++exported; });
  ticker.Start();
  // The first tick exports; the ticks after it do not while the clock stands still.
  ASSERT_TRUE(Eventually([&] { return ticker.ticks() >= 10; }));
  EXPECT_EQ(exported, 1);
  clock.AdvanceMs(999);
  const uint64_t seen = ticker.ticks();
  ASSERT_TRUE(Eventually([&] { return ticker.ticks() >= seen + 5; }));
  EXPECT_EQ(exported, 1);
  clock.AdvanceMs(1);
  ASSERT_TRUE(Eventually([&] { return exported == 2; }));
}

TEST(TickerTest, NoTickStartsAfterStop) {
  FakeClock clock;
  std::atomic<int> ticked{0};
  Ticker ticker(
      clock, {1, 1000}, [&] { ++ticked; }, nullptr);
  ticker.Start();
  ASSERT_TRUE(Eventually([&] { return ticked >= 1; }));
  ticker.Stop();
  const int after_stop = ticked;
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(ticked, after_stop);
  ticker.Stop();  // idempotent
}

}  // namespace ticker_test
}  // namespace convoy

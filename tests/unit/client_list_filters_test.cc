// `convoy list --state` and `--since` as typed.
#include "client/list_filters.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <ctime>

namespace convoy {
namespace client_list_filters_test {

TEST(ListFiltersTest, StatesAnyCaseCommaSeparatedOrRepeated) {
  auto one = ParseStateFilter({"RUNNING"});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (std::vector<v1::JobState>{v1::RUNNING}));
  auto many = ParseStateFilter({"pending, Restarting", "RUNNING", "pending"});
  ASSERT_TRUE(many.ok()) << many.status().message();
  EXPECT_EQ(*many, (std::vector<v1::JobState>{v1::PENDING, v1::RESTARTING, v1::RUNNING}));
  EXPECT_TRUE(ParseStateFilter({})->empty());
}

TEST(ListFiltersTest, UnknownStatesAreNamed) {
  for (const std::string bad : {"RUNING", "", "JOB_STATE_UNSPECIFIED", "RUNNING,,FAILED"}) {
    auto st = ParseStateFilter({bad});
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(st.status().message().rfind("state: unknown state '", 0), 0u)
        << st.status().message();
  }
  EXPECT_NE(ParseStateFilter({"RUNING"}).status().message().find("'RUNING' (one of PENDING,"),
            std::string::npos);
}

TEST(ListFiltersTest, SinceIsADurationBackOrATime) {
  const int64_t now = 1'800'000'000'000;
  EXPECT_EQ(*ParseSince("90s", now), now - 90'000);
  EXPECT_EQ(*ParseSince("15m", now), now - 15 * 60'000);
  EXPECT_EQ(*ParseSince("1h", now), now - 3'600'000);
  EXPECT_EQ(*ParseSince("7d", now), now - 7 * 86'400'000LL);
  EXPECT_EQ(*ParseSince("2026-11-25T10:00Z", now), 1795600800000);
  EXPECT_EQ(*ParseSince("2026-11-25T10:00:30Z", now), 1795600830000);
  EXPECT_EQ(*ParseSince("2026-11-25Z", now), 1795564800000);
  // Local time (here: a zone 2 hours ahead of UTC, no daylight saving).
  const char* old = std::getenv("TZ");
  const std::string saved = old != nullptr ? old : "";
  setenv("TZ", "<+02>-2", 1);
  tzset();
  EXPECT_EQ(*ParseSince("2026-11-25T10:00", now), 1795600800000 - 2 * 3'600'000);
  EXPECT_EQ(*ParseSince("2026-11-25 10:00", now), 1795600800000 - 2 * 3'600'000);
  if (old != nullptr) {
    setenv("TZ", saved.c_str(), 1);
  } else {
    unsetenv("TZ");
  }
  tzset();
  for (const std::string bad : {"", "1", "1w", "h", "yesterday", "2026-13-01", "2026-11-25T25:00",
                                "2026-11-25T10", "2026-11-25T10:00:00:00", "-5m"}) {
    auto st = ParseSince(bad, now);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.status().message().rfind("since: '" + bad + "'", 0), 0u) << st.status().message();
  }
}

}  // namespace client_list_filters_test
}  // namespace convoy

// The log broker: ids, answers, cancellation and deadlines on a fake clock.
#include "coordinator/control/log_broker.h"

#include <gtest/gtest.h>

#include <vector>

namespace convoy {
namespace log_broker_test {

TEST(LogBrokerTest, AnAnswerReachesItsRequestOnceAndUnknownIdsAreIgnored) {
  FakeClock clock;
  LogBroker broker(clock, 10000);
  std::vector<std::string> got;
  const int64_t a =
      broker.Add([&](const StatusOr<v1::LogData>& d) { got.push_back(d->data()); }, 0);
  const int64_t b =
      broker.Add([&](const StatusOr<v1::LogData>& d) { got.push_back(d->data()); }, 0);
  EXPECT_NE(a, b);
  v1::LogData data;
  data.set_request_id(b);
  data.set_data("from b");
  EXPECT_TRUE(broker.Answer(data));
  EXPECT_FALSE(broker.Answer(data));  // answered already
  data.set_request_id(999);
  EXPECT_FALSE(broker.Answer(data));
  EXPECT_EQ(got, std::vector<std::string>{"from b"});
  EXPECT_EQ(broker.pending(), 1u);
  broker.Cancel(a);
  EXPECT_EQ(broker.pending(), 0u);
}

TEST(LogBrokerTest, ARequestFailsAfterItsWaitPlusTheAnswerTimeout) {
  FakeClock clock;
  LogBroker broker(clock, 10000);
  std::vector<Status> failed;
  auto record = [&](const StatusOr<v1::LogData>& d) { failed.push_back(d.status()); };
  broker.Add(record, 0);
  broker.Add(record, 5000);  // a follow request the worker may hold for 5 s
  clock.AdvanceMs(9999);
  EXPECT_EQ(broker.Expire(), 0);
  clock.AdvanceMs(1);
  EXPECT_EQ(broker.Expire(), 1);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].code(), StatusCode::kUnavailable);
  clock.AdvanceMs(5000);
  EXPECT_EQ(broker.Expire(), 1);
  EXPECT_EQ(broker.pending(), 0u);
}

TEST(LogBrokerTest, OnlyTheWorkerAskedMayAnswer) {
  FakeClock clock;
  LogBroker broker(clock, 10000);
  std::vector<std::string> got;
  const int64_t id =
      broker.Add([&](const StatusOr<v1::LogData>& d) { got.push_back(d->data()); }, 0, "w1");
  v1::LogData data;
  data.set_request_id(id);
  data.set_data("forged by w2");
  EXPECT_FALSE(broker.Answer(data, "w2"));
  EXPECT_TRUE(got.empty());
  data.set_data("from w1");
  EXPECT_TRUE(broker.Answer(data, "w1"));
  EXPECT_EQ(got, std::vector<std::string>{"from w1"});
}

}  // namespace log_broker_test
}  // namespace convoy

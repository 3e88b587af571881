// The metric book: one latest record per rank, merged within an attempt, fresh across them.
#include "coordinator/state/metric_book.h"

#include <gtest/gtest.h>

namespace convoy {
namespace metric_book_test {

v1::MetricRecord Rec(int rank, int64_t step, double loss, std::map<std::string, double> values) {
  v1::MetricRecord r;
  r.set_rank(rank);
  r.set_step(step);
  r.set_has_step(true);
  if (loss >= 0) {
    r.set_loss(loss);
    r.set_has_loss(true);
  }
  for (const auto& [k, v] : values) (*r.mutable_values())[k] = v;
  return r;
}

TEST(MetricBookTest, KeepsOneRecordPerRankAndMergesValuesWithinAnAttempt) {
  v1::Job job;
  MetricBook book;
  book.Record(&job, Rec(0, 10, 0.5, {{"samples_per_s", 100}}), 0);
  book.Record(&job, Rec(1, 10, 0.6, {}), 0);
  // An evaluation record: adds test_accuracy, carries no loss.
  v1::MetricRecord merged = book.Record(&job, Rec(0, 10, -1, {{"test_accuracy", 0.86}}), 0);
  ASSERT_EQ(job.latest_size(), 2);
  EXPECT_EQ(merged.values().at("samples_per_s"), 100);
  EXPECT_EQ(merged.values().at("test_accuracy"), 0.86);
  EXPECT_TRUE(merged.has_loss());
  EXPECT_DOUBLE_EQ(merged.loss(), 0.5);
  EXPECT_EQ(job.latest(0).values().at("test_accuracy"), 0.86);
}

TEST(MetricBookTest, ANewAttemptStartsAfreshAndARebuiltBookFindsOldRecords) {
  v1::Job job;
  MetricBook book;
  book.Record(&job, Rec(0, 100, 0.5, {{"test_accuracy", 0.8}}), 0);
  v1::MetricRecord next = book.Record(&job, Rec(0, 1, -1, {{"samples_per_s", 50}}), 1);
  EXPECT_EQ(next.attempt(), 1);
  EXPECT_EQ(next.values().count("test_accuracy"), 0u);
  EXPECT_FALSE(next.has_loss());
  MetricBook rebuilt;  // after a coordinator restart
  rebuilt.Rebuild(job);
  rebuilt.Record(&job, Rec(0, 2, 0.4, {}), 1);
  ASSERT_EQ(job.latest_size(), 1);
  EXPECT_EQ(job.latest(0).step(), 2);
  EXPECT_EQ(job.latest(0).values().at("samples_per_s"), 50);
}

}  // namespace metric_book_test
}  // namespace convoy

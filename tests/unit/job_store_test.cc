#include <gtest/gtest.h>

#include "tests/support/memory_job_store.h"

namespace convoy {
namespace job_store_test {

TEST(MemoryJobStoreTest, KeepsTheEventLogAndHonoursInjectedFailures) {
  MemoryJobStore store;
  v1::Job job;
  job.set_id("j-000001");
  v1::JobEvent e;
  e.set_reason("one");
  ASSERT_TRUE(store.SaveJob(job, &e).ok());
  job.set_state(v1::RUNNING);
  ASSERT_TRUE(store.SaveJob(job, nullptr).ok());
  store.FailNextWrite();
  job.set_state(v1::FAILED);
  e.set_reason("two");
  EXPECT_FALSE(store.SaveJob(job, &e).ok());
  auto jobs = store.LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].state(), v1::RUNNING);  // the failed write left nothing behind
  ASSERT_EQ((*jobs)[0].events_size(), 1);
  EXPECT_EQ((*jobs)[0].events(0).reason(), "one");
}

}  // namespace job_store_test
}  // namespace convoy

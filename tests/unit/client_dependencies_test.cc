// How `after` reads in the CLI (client/dependencies.h): `convoy status` says what a job
// waits for and what it was submitted after; `convoy queue` lists the jobs that wait for
// others after the queue, with "-" for their place; `submit --after` fills the spec.
#include "client/dependencies.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "client/commands.h"
#include "client/format.h"

namespace convoy {
namespace client_dependencies_test {

v1::Job Waiting(const std::string& id, const std::string& on) {
  v1::Job job;
  job.set_id(id);
  job.set_state(v1::PENDING);
  job.mutable_spec()->set_name("eval");
  job.mutable_spec()->set_nodes(1);
  job.mutable_spec()->set_procs_per_node(1);
  v1::JobDependency* d = job.mutable_spec()->add_after();
  d->set_job_id(on);
  d->set_when(v1::DEPENDENCY_SUCCEEDED);
  v1::JobDependency* e = job.mutable_spec()->add_after();
  e->set_job_id("j-000002");
  e->set_when(v1::DEPENDENCY_ENDED);
  *job.add_waiting_for() = *d;
  job.set_pending_reason("waiting for " + on + " to succeed");
  return job;
}

TEST(ClientDependenciesTest, StatusSaysWhatTheJobWaitsFor) {
  const v1::Job job = Waiting("j-000003", "j-000001");
  EXPECT_EQ(FormatDependencies(job),
            "  waiting:  for j-000001 to succeed\n"
            "  after:    j-000001 (succeeded), j-000002 (ended)\n");
  const std::string status = FormatJobStatus(job, 0);
  EXPECT_NE(status.find("  waiting:  for j-000001 to succeed\n"), std::string::npos) << status;
  // Not "#0 in the queue": it has no place there yet.
  EXPECT_EQ(status.find("in the queue"), std::string::npos) << status;
  v1::Job plain;
  plain.set_id("j-000009");
  EXPECT_EQ(FormatDependencies(plain), "");
}

TEST(ClientDependenciesTest, QueueListsWaitingJobsAfterTheQueue) {
  v1::ListJobsResponse jobs;
  *jobs.add_jobs() = Waiting("j-000003", "j-000001");
  v1::Job queued;
  queued.set_id("j-000004");
  queued.set_queue_position(1);
  queued.set_pending_reason("needs 1 worker with 1 free slot");
  *jobs.add_jobs() = queued;
  v1::Job stopping;  // neither: not listed
  stopping.set_id("j-000005");
  *jobs.add_jobs() = stopping;
  const std::string text = FormatQueue(jobs, 0);
  const size_t first = text.find("j-000004"), second = text.find("j-000003");
  ASSERT_NE(first, std::string::npos) << text;
  ASSERT_NE(second, std::string::npos) << text;
  EXPECT_LT(first, second) << text;
  EXPECT_NE(text.find("waiting for j-000001 to succeed"), std::string::npos) << text;
  EXPECT_EQ(text.find("j-000005"), std::string::npos) << text;
  EXPECT_EQ(QueuePositionCell(jobs.jobs(0)), "-");
  EXPECT_EQ(QueuePositionCell(queued), "1");
}

TEST(ClientDependenciesTest, SubmitAfterFillsTheSpecAndBadValuesAreUsageErrors) {
  SubmitArgs args;
  args.command = {"/bin/true"};
  args.after = {"j-000004", "j-000005:failed"};
  std::istringstream in;
  auto spec = BuildSubmitSpec(args, in);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->after_size(), 2);
  EXPECT_EQ(spec->after(1).job_id(), "j-000005");
  EXPECT_EQ(spec->after(1).when(), v1::DEPENDENCY_FAILED);
  args.after = {"j-000004:never"};
  auto bad = BuildSubmitSpec(args, in);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--after j-000004:never"), std::string::npos);
  args.after = {"train"};
  auto id = BuildSubmitSpec(args, in);
  EXPECT_NE(id.status().message().find("after[0].job: 'train' is not a job id"), std::string::npos)
      << id.status().message();
}

}  // namespace client_dependencies_test
}  // namespace convoy

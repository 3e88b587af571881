// ListJobs and ListWorkers paging through the real gRPC server and SQLite store: 1,000 jobs
// paged in pages of 50 list every job exactly once, also while jobs are submitted between
// pages; filters and bad requests are answered naming the field.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>

#include "coordinator/state/list_query.h"
#include "tests/support/test_cluster.h"

namespace convoy {
namespace coordinator_list_paging_test {

using namespace std::chrono_literals;

v1::JobSpec Spec(const std::string& name) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("true");
  return spec;
}

class ListPagingTest : public ::testing::Test {
 protected:
  // Submits `n` jobs straight to the Coordinator (group-committed together: fast), and
  // returns their ids once every one is durable.
  std::vector<std::string> SubmitMany(int n) {
    std::vector<std::string> ids(static_cast<size_t>(n));
    std::atomic<int> done{0};
    for (int i = 0; i < n; ++i) {
      cluster_.coordinator().Submit(Spec("bulk"), "", "", "",
                                    [&ids, &done, i](StatusOr<std::string> id) {
                                      EXPECT_TRUE(id.ok());
                                      if (id.ok()) ids[static_cast<size_t>(i)] = *id;
                                      ++done;
                                    });
    }
    EXPECT_TRUE(testing::TestCluster::WaitFor([&] { return done == n; }, 120s));
    return ids;
  }

  grpc::Status List(const v1::ListJobsRequest& req, v1::ListJobsResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    return cluster_.jobs().ListJobs(&ctx, req, resp);
  }

  testing::TestCluster cluster_;
};

TEST_F(ListPagingTest, AThousandJobsInPagesOf50EachExactlyOnceWhileJobsArrive) {
  const std::vector<std::string> before = SubmitMany(1000);
  std::map<std::string, int> seen;
  std::vector<std::string> order;
  std::vector<std::string> submitted_meanwhile;
  v1::ListJobsRequest req;
  req.set_limit(50);
  int pages = 0;
  for (;;) {
    v1::ListJobsResponse page;
    grpc::Status st = List(req, &page);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_LE(page.jobs_size(), 50);
    ++pages;
    for (const v1::Job& j : page.jobs()) {
      ++seen[j.id()];
      order.push_back(j.id());
    }
    if (page.next_page_token().empty()) break;
    ASSERT_EQ(page.jobs_size(), 50) << "only the last page may be short";
    // New jobs between pages, through the real RPC.
    for (int i = 0; i < 3; ++i) submitted_meanwhile.push_back(cluster_.Submit(Spec("late")));
    req.set_page_token(page.next_page_token());
    ASSERT_LT(pages, 200) << "paging does not end";
  }
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id << " listed " << n << " times";
  for (const std::string& id : before) EXPECT_EQ(seen.count(id), 1u) << id << " missed";
  // Jobs that arrived while paging come after the cursor: every one is on a later page.
  for (const std::string& id : submitted_meanwhile) EXPECT_EQ(seen.count(id), 1u) << id;
  for (size_t i = 1; i < order.size(); ++i) {
    EXPECT_TRUE(JobIdLess()(order[i - 1], order[i])) << order[i - 1] << " then " << order[i];
  }
  EXPECT_EQ(seen.size(), before.size() + submitted_meanwhile.size());
  EXPECT_GE(pages, 20);
}

TEST_F(ListPagingTest, FiltersAndBadRequestsOverTheWire) {
  const std::vector<std::string> ids = SubmitMany(5);
  {
    grpc::ClientContext ctx;
    v1::CancelJobRequest cancel;
    cancel.set_job_id(ids[1]);
    v1::Job job;
    ASSERT_TRUE(cluster_.jobs().CancelJob(&ctx, cancel, &job).ok());
  }
  v1::ListJobsRequest req;
  req.add_states(v1::CANCELLED);
  v1::ListJobsResponse resp;
  ASSERT_TRUE(List(req, &resp).ok());
  ASSERT_EQ(resp.jobs_size(), 1);
  EXPECT_EQ(resp.jobs(0).id(), ids[1]);
  EXPECT_EQ(resp.next_page_token(), "");

  req.Clear();
  req.set_since_unix_ms(int64_t{1} << 50);  // the far future: nothing
  resp.Clear();
  ASSERT_TRUE(List(req, &resp).ok());
  EXPECT_EQ(resp.jobs_size(), 0);

  for (const auto& [fill, error] :
       std::vector<std::pair<std::function<void(v1::ListJobsRequest&)>, std::string>>{
           {[](v1::ListJobsRequest& r) { r.set_page_token("nonsense"); }, "page_token: malformed"},
           {[](v1::ListJobsRequest& r) { r.set_limit(1001); }, "limit: 1001"},
           {[](v1::ListJobsRequest& r) { r.add_states(static_cast<v1::JobState>(99)); },
            "states: unknown state 99"},
       }) {
    v1::ListJobsRequest bad;
    fill(bad);
    grpc::Status st = List(bad, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.error_message().rfind(error, 0), 0u) << st.error_message();
  }
}

TEST_F(ListPagingTest, WorkersPageByName) {
  std::vector<std::unique_ptr<testing::ScriptedWorker>> workers;
  for (int i = 0; i < 25; ++i) {
    char name[8];
    std::snprintf(name, sizeof(name), "w%02d", i);
    workers.push_back(cluster_.ConnectScripted(name));
  }
  std::vector<std::string> names;
  v1::ListWorkersRequest req;
  req.set_limit(10);
  int pages = 0;
  for (;;) {
    grpc::ClientContext ctx;
    v1::ListWorkersResponse page;
    ASSERT_TRUE(cluster_.jobs().ListWorkers(&ctx, req, &page).ok());
    ++pages;
    for (const v1::WorkerInfo& w : page.workers()) names.push_back(w.name());
    if (page.next_page_token().empty()) break;
    req.set_page_token(page.next_page_token());
  }
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(names.size(), 25u);
  for (size_t i = 1; i < names.size(); ++i) EXPECT_LT(names[i - 1], names[i]);
  grpc::ClientContext ctx;
  v1::ListWorkersRequest bad;
  bad.set_page_token("jobs-after:j-000001");
  v1::ListWorkersResponse resp;
  grpc::Status st = cluster_.jobs().ListWorkers(&ctx, bad, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().rfind("page_token: malformed", 0), 0u) << st.error_message();
}

}  // namespace coordinator_list_paging_test
}  // namespace convoy

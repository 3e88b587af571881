// ListJobs / ListWorkers requests: field checks (table-driven), the submission order of ids,
// and JobManager's pages with filters (fake clock, in-memory store, no sockets).
#include "coordinator/state/list_query.h"

#include <gtest/gtest.h>

#include <set>

#include "coordinator/control/job_manager.h"
#include "tests/support/memory_job_store.h"

namespace convoy {
namespace list_query_test {

class NoWorkers : public WorkerChannel {
 public:
  bool Send(const std::string&, const v1::CoordinatorMessage&) override { return false; }
};

TEST(ListQueryTest, RequestsAreCheckedNamingTheField) {
  struct Case {
    std::string what;
    v1::ListJobsRequest req;
    std::string error;  // empty: accepted
  };
  std::vector<Case> cases;
  auto add = [&](const std::string& what, auto fill, const std::string& error) {
    Case c{what, {}, error};
    fill(c.req);
    cases.push_back(c);
  };
  add(
      "empty", [](v1::ListJobsRequest&) {}, "");
  add(
      "states",
      [](v1::ListJobsRequest& r) {
        r.add_states(v1::RUNNING);
        r.add_states(v1::FAILED);
      },
      "");
  add(
      "unspecified state", [](v1::ListJobsRequest& r) { r.add_states(v1::JOB_STATE_UNSPECIFIED); },
      "states: unknown state 0");
  add(
      "unknown state", [](v1::ListJobsRequest& r) { r.add_states(static_cast<v1::JobState>(42)); },
      "states: unknown state 42");
  add(
      "negative since", [](v1::ListJobsRequest& r) { r.set_since_unix_ms(-1); },
      "since_unix_ms: must not be negative");
  add(
      "negative limit", [](v1::ListJobsRequest& r) { r.set_limit(-1); },
      "limit: -1 is not between 0 and 1000");
  add(
      "limit too large", [](v1::ListJobsRequest& r) { r.set_limit(1001); },
      "limit: 1001 is not between 0 and 1000");
  add(
      "largest limit", [](v1::ListJobsRequest& r) { r.set_limit(1000); }, "");
  add(
      "garbage token", [](v1::ListJobsRequest& r) { r.set_page_token("xyz"); },
      "page_token: malformed");
  add(
      "worker token for jobs", [](v1::ListJobsRequest& r) { r.set_page_token("workers-after:w1"); },
      "page_token: malformed");
  add(
      "token with a slash", [](v1::ListJobsRequest& r) { r.set_page_token("jobs-after:a/b"); },
      "page_token: malformed");
  add(
      "good token", [](v1::ListJobsRequest& r) { r.set_page_token(JobPageToken("j-000007")); }, "");
  for (const Case& c : cases) {
    auto q = ParseJobQuery(c.req);
    if (c.error.empty()) {
      EXPECT_TRUE(q.ok()) << c.what << ": " << q.status().message();
    } else {
      ASSERT_FALSE(q.ok()) << c.what;
      EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument) << c.what;
      EXPECT_EQ(q.status().message().rfind(c.error, 0), 0u)
          << c.what << ": " << q.status().message();
    }
  }
  v1::ListJobsRequest defaults;
  EXPECT_EQ(ParseJobQuery(defaults)->limit, kDefaultPageSize);
  v1::ListJobsRequest token;
  token.set_page_token(JobPageToken("j-000007"));
  EXPECT_EQ(ParseJobQuery(token)->after, "j-000007");

  v1::ListWorkersRequest w;
  w.set_page_token(WorkerPageToken("w-3"));
  EXPECT_EQ(ParseWorkerQuery(w)->after, "w-3");
  w.set_page_token(JobPageToken("j-000001"));
  EXPECT_EQ(ParseWorkerQuery(w).status().message().rfind("page_token: malformed", 0), 0u);
  w.set_page_token("");
  w.set_limit(5000);
  EXPECT_EQ(ParseWorkerQuery(w).status().message().rfind("limit: 5000", 0), 0u);
}

TEST(ListQueryTest, JobIdsSortBySubmission) {
  JobIdLess less;
  EXPECT_TRUE(less("j-000009", "j-000010"));
  EXPECT_TRUE(less("j-999999", "j-1000000"));  // past a million the id grows a digit
  EXPECT_FALSE(less("j-1000000", "j-999999"));
  EXPECT_FALSE(less("j-000001", "j-000001"));
}

class ListPageTest : public ::testing::Test {
 protected:
  ListPageTest() : registry_(clock_, 10000), jm_(clock_, store_, registry_, channel_, {}) {
    EXPECT_TRUE(jm_.Recover().ok());
  }
  std::string Submit(const std::string& owner) {
    v1::JobSpec spec;
    spec.set_name("job");
    spec.set_nodes(1);
    spec.set_procs_per_node(1);
    spec.add_command("true");
    auto id = jm_.Submit(spec, owner);
    EXPECT_TRUE(id.ok()) << id.status().message();
    clock_.AdvanceMs(1000);
    return *id;
  }
  std::vector<std::string> Ids(const JobManager::JobPage& page) {
    std::vector<std::string> out;
    for (const v1::Job& j : page.jobs) out.push_back(j.id());
    return out;
  }
  JobQuery Query(int limit, const std::string& after = "") {
    JobQuery q;
    q.limit = limit;
    q.after = after;
    return q;
  }

  FakeClock clock_;
  MemoryJobStore store_;
  NoWorkers channel_;
  WorkerRegistry registry_;
  JobManager jm_;
};

TEST_F(ListPageTest, PagesFollowTheCursorAndTheLastHasNoToken) {
  for (int i = 0; i < 5; ++i) Submit("alice");
  auto first = jm_.ListPage(Query(2));
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"j-000001", "j-000002"}));
  EXPECT_EQ(first.next_page_token, JobPageToken("j-000002"));
  auto second = jm_.ListPage(Query(2, "j-000002"));
  EXPECT_EQ(Ids(second), (std::vector<std::string>{"j-000003", "j-000004"}));
  auto last = jm_.ListPage(Query(2, "j-000004"));
  EXPECT_EQ(Ids(last), (std::vector<std::string>{"j-000005"}));
  EXPECT_EQ(last.next_page_token, "");
  // A page that ends exactly at the last job has no token either (no empty page follows).
  auto exact = jm_.ListPage(Query(5));
  EXPECT_EQ(exact.jobs.size(), 5u);
  EXPECT_EQ(exact.next_page_token, "");
  // A summary unless full.
  EXPECT_EQ(exact.jobs[0].events_size(), 0);
  JobQuery full = Query(1);
  full.full = true;
  EXPECT_EQ(jm_.ListPage(full).jobs[0].events_size(), 1);
}

TEST_F(ListPageTest, FiltersByStateOwnerAndSince) {
  const std::string a1 = Submit("alice");
  const std::string b1 = Submit("bob");
  const int64_t later = clock_.NowUnixMs();
  const std::string a2 = Submit("alice");
  const std::string b2 = Submit("bob");
  ASSERT_TRUE(jm_.Cancel(b1, "", "bob").ok());

  JobQuery owner = Query(100);
  owner.owner = "alice";
  EXPECT_EQ(Ids(jm_.ListPage(owner)), (std::vector<std::string>{a1, a2}));
  JobQuery cancelled = Query(100);
  cancelled.states = {v1::CANCELLED};
  EXPECT_EQ(Ids(jm_.ListPage(cancelled)), (std::vector<std::string>{b1}));
  JobQuery pending_bob = Query(100);
  pending_bob.states = {v1::PENDING, v1::RUNNING};
  pending_bob.owner = "bob";
  EXPECT_EQ(Ids(jm_.ListPage(pending_bob)), (std::vector<std::string>{b2}));
  JobQuery since = Query(100);
  since.since_unix_ms = later;
  EXPECT_EQ(Ids(jm_.ListPage(since)), (std::vector<std::string>{a2, b2}));
  // Paging with a filter: the token is the last match, the page skips non-matches.
  JobQuery paged = Query(1);
  paged.owner = "alice";
  auto first = jm_.ListPage(paged);
  EXPECT_EQ(Ids(first), (std::vector<std::string>{a1}));
  EXPECT_EQ(first.next_page_token, JobPageToken(a1));
  paged.after = a1;
  auto second = jm_.ListPage(paged);
  EXPECT_EQ(Ids(second), (std::vector<std::string>{a2}));
  EXPECT_EQ(second.next_page_token, "");
}

TEST_F(ListPageTest, NewestFirstPagesGoTowardsOlderJobs) {
  for (int i = 0; i < 5; ++i) Submit(i % 2 == 0 ? "alice" : "bob");
  JobQuery q = Query(2);
  q.newest_first = true;
  auto first = jm_.ListPage(q);
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"j-000005", "j-000004"}));
  EXPECT_EQ(first.next_page_token, "jobs-before:j-000004");
  // The token, parsed back in the same order, starts the next page before that job.
  v1::ListJobsRequest req;
  req.set_newest_first(true);
  req.set_limit(2);
  req.set_page_token(first.next_page_token);
  auto parsed = ParseJobQuery(req);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  auto second = jm_.ListPage(*parsed);
  EXPECT_EQ(Ids(second), (std::vector<std::string>{"j-000003", "j-000002"}));
  req.set_page_token(second.next_page_token);
  auto last = jm_.ListPage(*ParseJobQuery(req));
  EXPECT_EQ(Ids(last), (std::vector<std::string>{"j-000001"}));
  EXPECT_EQ(last.next_page_token, "");
  // With a filter: only matches count, newest first.
  q.owner = "alice";
  q.limit = 100;
  EXPECT_EQ(Ids(jm_.ListPage(q)), (std::vector<std::string>{"j-000005", "j-000003", "j-000001"}));
  // A token of the other order is refused, naming the field.
  req.set_page_token("jobs-after:j-000002");
  auto mixed = ParseJobQuery(req);
  EXPECT_EQ(mixed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("page_token"), std::string::npos);
}

TEST_F(ListPageTest, WorkersPageByName) {
  for (const char* name : {"w3", "w1", "w2"}) {
    v1::Register reg;
    reg.set_name(name);
    reg.set_slots(1);
    jm_.OnRegister(reg);
  }
  WorkerQuery q;
  q.limit = 2;
  auto first = jm_.ListWorkersPage(q);
  ASSERT_EQ(first.workers.size(), 2u);
  EXPECT_EQ(first.workers[0].name(), "w1");
  EXPECT_EQ(first.workers[1].name(), "w2");
  EXPECT_EQ(first.next_page_token, WorkerPageToken("w2"));
  q.after = "w2";
  auto second = jm_.ListWorkersPage(q);
  ASSERT_EQ(second.workers.size(), 1u);
  EXPECT_EQ(second.workers[0].name(), "w3");
  EXPECT_EQ(second.next_page_token, "");
}

}  // namespace list_query_test
}  // namespace convoy

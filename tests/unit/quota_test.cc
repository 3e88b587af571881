// --quota rules (coordinator/sched/quota.h): parsing, and which rule gives each limit.
#include "coordinator/sched/quota.h"

#include <gtest/gtest.h>

namespace convoy {
namespace quota_test {

TEST(QuotaRulesTest, TheMostSpecificRuleWinsFieldByField) {
  QuotaRules rules;
  rules.SetDefaults(/*slots=*/16, /*queued=*/10);
  ASSERT_TRUE(rules.Add("role:user=slots:8,gpus:2").ok());
  ASSERT_TRUE(rules.Add("user:alice=slots:32").ok());
  Quota alice = rules.For("alice", "user");
  EXPECT_EQ(alice.slots, 32);
  EXPECT_EQ(alice.source, "--quota user:alice");
  EXPECT_EQ(alice.gpus, 2);  // from her role
  EXPECT_EQ(alice.gpus_source, "--quota role:user");
  EXPECT_EQ(alice.queued, 10);  // the default
  EXPECT_EQ(alice.queued_source, "--max-queued-per-user");
  Quota bob = rules.For("bob", "user");
  EXPECT_EQ(bob.slots, 8);
  Quota admin = rules.For("carol", "admin");
  EXPECT_EQ(admin.slots, 16);
  EXPECT_EQ(admin.gpus, 0);  // no limit
  // Jobs without an owner (--insecure) have no quota at all.
  Quota none = rules.For("", "");
  EXPECT_EQ(none.slots, 0);
  EXPECT_EQ(none.queued, 0);
}

TEST(QuotaRulesTest, BadRulesNameTheFlagAndTheProblem) {
  QuotaRules rules;
  for (const char* bad : {"user=slots:1", "role:viewer=slots:1", "group:x=slots:1",
                          "user:alice=slots", "user:alice=slots:-1", "user:alice=cores:4",
                          "user:alice=", "user:../x=slots:1", "role:user=slots:1x"}) {
    Status st = rules.Add(bad);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.message().rfind("--quota '", 0), 0u) << st.message();
  }
  EXPECT_TRUE(rules.Add("role:admin=queued:0").ok());
}

}  // namespace quota_test
}  // namespace convoy

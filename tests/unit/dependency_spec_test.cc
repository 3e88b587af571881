// The spec's `after` (spec/dependency_spec.h): read from YAML with `when` defaulting to
// succeeded, written back by --set overrides, appended by `convoy submit --after`, and every
// bad value refused with a message naming its field.
#include "spec/dependency_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spec/job_spec.h"

namespace convoy {
namespace dependency_spec_test {

const std::string kBase = "name: eval\nnodes: 1\nprocs_per_node: 1\ncommand: [/bin/true]\n";

TEST(DependencySpecTest, ReadsJobsAndConditionsWithSucceededTheDefault) {
  auto spec = ParseJobSpec(kBase +
                               "after:\n"
                               "  - job: j-000004\n"
                               "  - {job: j-000005, when: failed}\n"
                               "  - {job: j-000006, when: ended}\n"
                               "  - j-000007\n",
                           "eval.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->after_size(), 4);
  EXPECT_EQ(spec->after(0).job_id(), "j-000004");
  EXPECT_EQ(spec->after(0).when(), v1::DEPENDENCY_SUCCEEDED);
  EXPECT_EQ(spec->after(1).when(), v1::DEPENDENCY_FAILED);
  EXPECT_EQ(spec->after(2).when(), v1::DEPENDENCY_ENDED);
  EXPECT_EQ(spec->after(3).job_id(), "j-000007");
  EXPECT_EQ(spec->after(3).when(), v1::DEPENDENCY_SUCCEEDED);
}

TEST(DependencySpecTest, EveryBadValueIsNamedByItsField) {
  struct Case {
    std::string after;     // the YAML of `after`
    std::string expected;  // a substring of the error
  };
  const std::vector<Case> cases = {
      {"after: j-000004", "after: expected a list of {job: j-..., when:"},
      {"after: [{job: j-000004, when: sometimes}]",
       "after[0].when: must be succeeded, failed or "
       "ended, got 'sometimes'"},
      {"after: [{job: 'train'}]", "after[0].job: 'train' is not a job id"},
      {"after: [{when: failed}]", "after[0].job: missing"},
      {"after: [{job: j-000004, wen: failed}]",
       "after[0].wen: unknown field; did you mean 'when'?"},
      {"after: [j-000004, {job: j-000004, when: failed}]",
       "after[1].job: j-000004 is named twice (after[0] too)"},
      {"after: [[j-000004]]", "after[0]: expected a mapping"},
  };
  for (const Case& c : cases) {
    auto spec = ParseJobSpec(kBase + c.after + "\n", "eval.yaml");
    ASSERT_FALSE(spec.ok()) << c.after;
    EXPECT_NE(spec.status().message().find(c.expected), std::string::npos)
        << c.after << "\n  got: " << spec.status().message();
  }
}

TEST(DependencySpecTest, AtMostSixteen) {
  v1::JobSpec spec;
  for (int i = 1; i <= kMaxDependencies + 1; ++i) {
    spec.add_after()->set_job_id("j-" + std::to_string(100 + i));
  }
  const std::vector<SpecProblem> problems = FindDependencySpecProblems(spec);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].field, "after");
  EXPECT_EQ(problems[0].message, "at most 16 jobs, got 17");
}

TEST(DependencySpecTest, AnRpcsUnknownConditionIsNamed) {
  v1::JobSpec spec;
  v1::JobDependency* d = spec.add_after();
  d->set_job_id("j-000001");
  d->set_when(static_cast<v1::DependencyCondition>(9));
  const std::vector<SpecProblem> problems = FindDependencySpecProblems(spec);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].field, "after[0].when");
  // Left out by an RPC: read as succeeded.
  d->set_when(v1::DEPENDENCY_CONDITION_UNSPECIFIED);
  EXPECT_TRUE(FindDependencySpecProblems(spec).empty());
  EXPECT_EQ(ConditionOf(*d), v1::DEPENDENCY_SUCCEEDED);
  EXPECT_EQ(WaitText(*d), "j-000001 to succeed");
}

TEST(DependencySpecTest, SubmitAfterFlagsAppendToTheSpec) {
  v1::JobSpec spec;
  spec.add_after()->set_job_id("j-000001");
  ASSERT_TRUE(AppendAfterFlags({"j-000004", "j-000005:failed", "j-000006:ended"}, &spec).ok());
  ASSERT_EQ(spec.after_size(), 4);
  EXPECT_EQ(spec.after(1).job_id(), "j-000004");
  EXPECT_EQ(spec.after(1).when(), v1::DEPENDENCY_SUCCEEDED);
  EXPECT_EQ(spec.after(2).when(), v1::DEPENDENCY_FAILED);
  EXPECT_EQ(spec.after(3).when(), v1::DEPENDENCY_ENDED);
  EXPECT_EQ(WaitText(spec.after(2)), "j-000005 to fail");

  Status bad = AppendAfterFlags({"j-000004:afterok"}, &spec);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("--after j-000004:afterok: expected JOB or JOB:WHEN"),
            std::string::npos)
      << bad.message();
  EXPECT_FALSE(AppendAfterFlags({":failed"}, &spec).ok());
}

TEST(DependencySpecTest, SetOverridesKeepAfter) {
  v1::JobSpec spec;
  spec.set_name("eval");
  spec.set_nodes(1);
  spec.set_procs_per_node(1);
  spec.add_command("/bin/true");
  v1::JobDependency* d = spec.add_after();
  d->set_job_id("j-000002");
  d->set_when(v1::DEPENDENCY_FAILED);
  auto out = OverrideJobSpec(spec, {"max_restarts=1"}, "submit");
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->after_size(), 1);
  EXPECT_EQ(out->after(0).job_id(), "j-000002");
  EXPECT_EQ(out->after(0).when(), v1::DEPENDENCY_FAILED);
  // And `after` itself through --set, as in the file.
  auto set = OverrideJobSpec(spec, {"after=[{job: j-000003, when: ended}]"}, "submit");
  ASSERT_TRUE(set.ok()) << set.status().message();
  ASSERT_EQ(set->after_size(), 1);
  EXPECT_EQ(set->after(0).when(), v1::DEPENDENCY_ENDED);
}

}  // namespace dependency_spec_test
}  // namespace convoy

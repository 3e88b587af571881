// Issue 28's rule, moved out of JobService.SubmitJob: a job names only code its owner
// uploaded (an admin, any stored code); knowing a hash is not having the code. Every refusal
// names the field code_sha256.
#include "coordinator/control/code_access.h"

#include <gtest/gtest.h>

#include "common/pki.h"
#include "tests/support/temp_dir.h"

namespace convoy {
namespace code_access_test {

TEST(CheckJobCodeTest, AJobNamesOnlyItsOwnersStoredCode) {
  testing::TempDir dir;
  auto store = CodeStore::Open((dir.path() / "code").string());
  ASSERT_TRUE(store.ok());
  const std::string data = "alice's code";
  const std::string sha = Sha256Hex(data);
  ASSERT_TRUE((*store)->Append(sha, static_cast<int64_t>(data.size()), 0, data, "alice").ok());
  CodeStore* code = store->get();

  EXPECT_TRUE(CheckJobCode(code, "", "bob", false, "user bob").ok());  // no code at all
  EXPECT_TRUE(CheckJobCode(code, sha, "alice", false, "user alice").ok());
  EXPECT_TRUE(CheckJobCode(code, sha, "root", true, "admin root").ok());

  const Status theirs = CheckJobCode(code, sha, "bob", false, "user bob");
  EXPECT_EQ(theirs.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(theirs.message().rfind("code_sha256: code archive " + sha +
                                       " was not uploaded by "
                                       "user bob",
                                   0),
            0u)
      << theirs.message();

  const std::string unknown = Sha256Hex("never uploaded");
  for (CodeStore* where : {code, static_cast<CodeStore*>(nullptr)}) {
    const Status missing = CheckJobCode(where, unknown, "root", true, "admin root");
    EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(missing.message().rfind("code_sha256: no code archive", 0), 0u) << missing.message();
  }
}

}  // namespace code_access_test
}  // namespace convoy

#include "coordinator/control/code_access.h"

namespace convoy {

Status CheckJobCode(CodeStore* code, const std::string& code_sha256, const std::string& user,
                    bool admin, const std::string& who) {
  if (code_sha256.empty()) return Status::Ok();
  if (code == nullptr || !code->Has(code_sha256)) {
    return Status::FailedPrecondition("code_sha256: no code archive " + code_sha256 +
                                      " is stored; upload it with UploadCode first");
  }
  if (!admin && !code->OwnedBy(code_sha256, user)) {
    return Status::PermissionDenied(
        "code_sha256: code archive " + code_sha256 + " was not uploaded by " + who +
        "; a job names only its owner's code (upload it: submit --code)");
  }
  return Status::Ok();
}

}  // namespace convoy

#include "common/version.h"

#include "convoy_revision.h"

namespace convoy {

const char* GitRevision() { return CONVOY_GIT_REVISION; }

std::string VersionLine(const std::string& program) {
  return program + " " + CONVOY_VERSION + " (git " + GitRevision() + ")";
}

}  // namespace convoy

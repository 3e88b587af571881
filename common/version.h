// What --version prints on every Convoy binary.
#pragma once

#include <string>

namespace convoy {

// The git revision the binary was built from ("unknown" outside git).
const char* GitRevision();

// "<program> <version> (git <revision>)", e.g. "convoy-worker 0.1.0 (git 1a2b3c4)".
std::string VersionLine(const std::string& program);

}  // namespace convoy

// Small string predicates shared by the daemons' directory scans.
#pragma once

#include <string_view>

namespace convoy {

// Whether `name` ends with `suffix` with something before it ("a.part", not ".part"): what a
// directory scan asks of the files it keeps or removes.
inline bool HasSuffix(std::string_view name, std::string_view suffix) {
  return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

}  // namespace convoy

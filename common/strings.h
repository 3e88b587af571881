// Small string helpers shared by the daemons' directory scans and the spec's messages.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace convoy {

// Whether `name` ends with `suffix` with something before it ("a.part", not ".part"): what a
// directory scan asks of the files it keeps or removes.
inline bool HasSuffix(std::string_view name, std::string_view suffix) {
  return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

// A number as a person writes it in a message: "-1", "0.5", "1e+30", "nan" (%.12g).
inline std::string ShortNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.12g", value);
  return text;
}

}  // namespace convoy

// Small string helpers shared by the daemons' directory scans and the spec's messages.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
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

// The text of errno as it is now ("No such file or directory").
inline std::string ErrnoMessage() { return std::strerror(errno); }

// "`what`: " and the text of errno as it is now ("/a/b: No such file or directory").
inline std::string ErrnoText(const std::string& what) { return what + ": " + ErrnoMessage(); }

// What a user wrote, quoted in a message: at most 64 bytes, control bytes as '?'.
inline std::string QuoteForMessage(const std::string& text) {
  std::string out = text.substr(0, 64);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return "'" + out + (text.size() > 64 ? "...'" : "'");
}

// A metric's name as a spec may name it: 1 to `max_bytes` of [A-Za-z0-9_.-].
inline bool IsMetricName(std::string_view name, size_t max_bytes) {
  if (name.empty() || name.size() > max_bytes) return false;
  for (char c : name) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace convoy

#include "client/list_filters.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>

namespace convoy {
namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string StateNames() {
  std::string out;
  for (int s = v1::JobState_MIN + 1; s <= v1::JobState_MAX; ++s) {
    if (!v1::JobState_IsValid(s)) continue;
    out += (out.empty() ? "" : ", ") + v1::JobState_Name(static_cast<v1::JobState>(s));
  }
  return out;
}

}  // namespace

StatusOr<std::vector<v1::JobState>> ParseStateFilter(const std::vector<std::string>& values) {
  std::vector<v1::JobState> out;
  for (const std::string& value : values) {
    size_t start = 0;
    while (start <= value.size()) {
      size_t comma = value.find(',', start);
      if (comma == std::string::npos) comma = value.size();
      const std::string name = Trim(value.substr(start, comma - start));
      start = comma + 1;
      v1::JobState state;
      if (!v1::JobState_Parse(Upper(name), &state) || state == v1::JOB_STATE_UNSPECIFIED) {
        return Status::InvalidArgument("state: unknown state '" + name + "' (one of " +
                                       StateNames() + ")");
      }
      if (std::find(out.begin(), out.end(), state) == out.end()) out.push_back(state);
    }
  }
  return out;
}

StatusOr<int64_t> ParseSince(const std::string& text, int64_t now_unix_ms) {
  const Status bad = Status::InvalidArgument(
      "since: '" + text +
      "' is neither a duration back from now (90s, 15m, 1h, 7d) nor a time "
      "(2026-11-25, 2026-11-25T10:00, 2026-11-25T10:00:30; local, or UTC with a trailing Z)");
  if (text.empty()) return bad;
  // A duration: digits and one unit.
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits > 0 && digits < 12 && text.size() == digits + 1) {
    const int64_t n = std::stoll(text.substr(0, digits));
    int64_t unit = 0;
    switch (text.back()) {
      case 's':
        unit = 1000;
        break;
      case 'm':
        unit = 60 * 1000;
        break;
      case 'h':
        unit = 3600 * 1000;
        break;
      case 'd':
        unit = 86400 * 1000;
        break;
    }
    if (unit == 0) return bad;
    return std::max<int64_t>(0, now_unix_ms - n * unit);
  }
  // A time: YYYY-MM-DD[THH:MM[:SS]][Z].
  std::string t = text;
  const bool utc = !t.empty() && (t.back() == 'Z' || t.back() == 'z');
  if (utc) t.pop_back();
  std::tm tm{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  char sep = 0;
  int used = 0;
  if (std::sscanf(t.c_str(), "%4d-%2d-%2d%n", &year, &month, &day, &used) != 3) return bad;
  if (static_cast<size_t>(used) != t.size()) {
    int more = 0;
    if (std::sscanf(t.c_str() + used, "%c%2d:%2d%n", &sep, &hour, &minute, &more) != 3 ||
        (sep != 'T' && sep != ' ')) {
      return bad;
    }
    used += more;
    if (static_cast<size_t>(used) != t.size()) {
      more = 0;
      if (std::sscanf(t.c_str() + used, ":%2d%n", &second, &more) != 1) return bad;
      used += more;
    }
    if (static_cast<size_t>(used) != t.size()) return bad;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60 ||
      year < 1970) {
    return bad;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  tm.tm_isdst = -1;
  const time_t s = utc ? timegm(&tm) : mktime(&tm);
  if (s == static_cast<time_t>(-1)) return bad;
  return int64_t{s} * 1000;
}

}  // namespace convoy

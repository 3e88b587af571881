#include "trainer/bad_steps.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace convoy::trainer {
namespace {

bool ToStep(const std::string& s, int64_t* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno != 0 || v < 1) return false;
  *out = v;
  return true;
}

}  // namespace

std::string ParseStepList(const std::string& text, std::vector<int64_t>* out) {
  out->clear();
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(at, comma - at);
    const size_t dash = item.find('-');
    int64_t lo = 0, hi = 0;
    bool ok = false;
    if (dash == std::string::npos) {
      ok = ToStep(item, &lo);
      hi = lo;
    } else {
      ok = ToStep(item.substr(0, dash), &lo) && ToStep(item.substr(dash + 1), &hi);
    }
    if (!ok || hi < lo) {
      return "expected steps (>= 1) and ranges separated by commas, like 7,13-15, got '" + text +
             "'";
    }
    if (hi - lo + 1 > kMaxListedSteps - static_cast<int64_t>(out->size())) {
      return "more than " + std::to_string(kMaxListedSteps) + " steps";
    }
    for (int64_t s = lo; s <= hi; ++s) out->push_back(s);
    at = comma + 1;
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  return "";
}

bool BadStepCounter::Record(int64_t step, bool bad) {
  if (!bad) {
    in_a_row_ = 0;
    passed_since_rewind_ = true;
    return false;
  }
  if (in_a_row_ == 0) first_of_run_ = step;
  ++in_a_row_;
  ++total_;
  return in_a_row_ >= max_in_a_row_;
}

void BadStepCounter::Rewound() {
  in_a_row_ = 0;
  ++rewinds_;
  passed_since_rewind_ = false;
}

}  // namespace convoy::trainer

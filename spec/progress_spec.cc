#include "spec/progress_spec.h"

#include <cmath>
#include <cstdio>

#include "common/strings.h"

namespace convoy {

double StragglerFactor(const v1::JobSpec& spec) {
  return spec.has_straggler_factor() ? spec.straggler_factor() : kDefaultStragglerFactor;
}

int StragglerSteps(const v1::JobSpec& spec) {
  return spec.has_straggler_steps() ? spec.straggler_steps() : kDefaultStragglerSteps;
}

bool ReplacesStragglers(const v1::JobSpec& spec) { return spec.on_straggler() == "replace"; }

int HangSteps(const v1::JobSpec& spec) { return spec.hang_steps(); }

std::vector<SpecProblem> FindProgressSpecProblems(const v1::JobSpec& spec) {
  std::vector<SpecProblem> out;
  if (spec.has_straggler_factor()) {
    const double f = spec.straggler_factor();
    if (!std::isfinite(f) || (f != 0 && (f < kMinStragglerFactor || f > kMaxStragglerFactor))) {
      out.push_back({"straggler_factor", "must be 0 (never name stragglers) or between " +
                                             ShortNumber(kMinStragglerFactor) + " and " +
                                             ShortNumber(kMaxStragglerFactor) + ", got " +
                                             ShortNumber(f)});
    }
  }
  if (spec.has_straggler_steps() && (spec.straggler_steps() < kMinStragglerSteps ||
                                     spec.straggler_steps() > kMaxStragglerSteps)) {
    out.push_back({"straggler_steps", "must be between " + std::to_string(kMinStragglerSteps) +
                                          " and " + std::to_string(kMaxStragglerSteps) + ", got " +
                                          std::to_string(spec.straggler_steps())});
  }
  if (!spec.on_straggler().empty() && spec.on_straggler() != "report" &&
      spec.on_straggler() != "replace") {
    std::string value = spec.on_straggler().substr(0, 64);
    for (char& c : value) {
      if (static_cast<unsigned char>(c) < 0x20) c = '?';
    }
    out.push_back({"on_straggler", "must be one of report, replace, got '" + value + "'"});
  }
  if (spec.hang_steps() != 0 &&
      (spec.hang_steps() < kMinHangSteps || spec.hang_steps() > kMaxHangSteps)) {
    out.push_back({"hang_steps", "must be 0 (off) or between " + std::to_string(kMinHangSteps) +
                                     " and " + std::to_string(kMaxHangSteps) + ", got " +
                                     std::to_string(spec.hang_steps())});
  }
  return out;
}

}  // namespace convoy

#include "spec/sweep_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "common/strings.h"

namespace convoy {
namespace {

// Why `path` is not a path `--set` takes ("" when it is one): dotted keys, none empty, and
// not the sweep itself.
std::string PathProblem(const std::string& path) {
  if (path.empty()) return "missing (a spec field as --set takes it, as trainer.lr)";
  if (path.size() > 256) return "is longer than 256 bytes";
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == '=') {
      return QuoteForMessage(path) + " is not a field (FIELD or FIELD.FIELD, as trainer.lr)";
    }
  }
  const std::string top = path.substr(0, path.find('.'));
  const bool map_key = top == "env" || top == "node_selector";
  size_t start = 0;
  for (int key = 0;; ++key) {
    const size_t dot = map_key && key == 1 ? std::string::npos : path.find('.', start);
    const size_t end = dot == std::string::npos ? path.size() : dot;
    if (end == start)
      return QuoteForMessage(path) + " is not a field (FIELD or FIELD.FIELD, as trainer.lr)";
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (top == "sweep") return "a sweep cannot sweep its own settings";
  return "";
}

}  // namespace

SweepSettings ResolveSweep(const v1::SweepSpec& sweep) {
  SweepSettings s;
  s.metric = sweep.metric().empty() ? "loss" : sweep.metric();
  s.maximize = sweep.goal() == "max";
  s.max_parallel = sweep.has_max_parallel() ? sweep.max_parallel() : kDefaultSweepMaxParallel;
  s.random = sweep.sampling() == "random";
  s.trials = sweep.trials();
  s.seed = sweep.has_seed() ? sweep.seed() : kDefaultSweepSeed;
  s.asha = sweep.early_stop() == "asha";
  s.min_steps = sweep.asha().has_min_steps() ? sweep.asha().min_steps() : kDefaultAshaMinSteps;
  s.reduction_factor = sweep.asha().has_reduction_factor() ? sweep.asha().reduction_factor()
                                                           : kDefaultAshaReductionFactor;
  return s;
}

std::vector<SpecProblem> FindSweepProblems(const v1::JobSpec& spec) {
  std::vector<SpecProblem> out;
  if (!spec.has_sweep()) return out;
  const v1::SweepSpec& sw = spec.sweep();
  const auto add = [&out](const std::string& field, const std::string& message) {
    out.push_back({"sweep." + field, message});
  };
  const bool random = sw.sampling() == "random";
  if (!sw.sampling().empty() && sw.sampling() != "grid" && !random) {
    add("sampling", "must be one of grid, random, got " + QuoteForMessage(sw.sampling()));
  }
  if (sw.parameters_size() == 0) {
    add("parameters", "missing (the spec fields to sweep, as {trainer.lr: [0.1, 0.01]})");
  } else if (sw.parameters_size() > kMaxSweepParameters) {
    add("parameters", "has " + std::to_string(sw.parameters_size()) + " parameters; at most " +
                          std::to_string(kMaxSweepParameters));
  }
  std::set<std::string> paths;
  double combinations = 1;
  for (int i = 0; i < sw.parameters_size() && i < kMaxSweepParameters; ++i) {
    const v1::SweepParameter& p = sw.parameters(i);
    const std::string at = "parameters[" + std::to_string(i) + "]";
    if (const std::string why = PathProblem(p.path()); !why.empty()) {
      add(at + ".path", why);
    } else if (!paths.insert(p.path()).second) {
      add(at + ".path", QuoteForMessage(p.path()) + " is swept twice");
    }
    const bool range = p.has_min() || p.has_max();
    if (p.values_size() > kMaxSweepValues) {
      add(at + ".values", "has " + std::to_string(p.values_size()) + " values; at most " +
                              std::to_string(kMaxSweepValues));
    }
    for (int j = 0; j < p.values_size() && j < kMaxSweepValues; ++j) {
      if (p.values(j).size() > kMaxSweepValueBytes) {
        add(at + ".values[" + std::to_string(j) + "]",
            "is longer than " + std::to_string(kMaxSweepValueBytes) + " bytes");
      }
    }
    if (range && !random) {
      add(at + ".min", "a range (min, max) is for sampling: random; list values for a grid");
    } else if (range && p.values_size() > 0) {
      add(at + ".values", "give either values or a range (min, max), not both");
    } else if (range) {
      if (!p.has_min() || !p.has_max()) {
        add(at + (p.has_min() ? ".max" : ".min"), "missing (a range needs both min and max)");
      } else if (!std::isfinite(p.min()) || !std::isfinite(p.max()) || p.min() >= p.max()) {
        add(at + ".max",
            "must be greater than min (" + ShortNumber(p.min()) + "), got " + ShortNumber(p.max()));
      } else if (p.log() && p.min() <= 0) {
        add(at + ".min", "must be greater than 0 with log, got " + ShortNumber(p.min()));
      }
    } else if (p.values_size() == 0) {
      add(at + ".values", random ? "missing (values to draw from, or a range: min and max)"
                                 : "missing (the values to try, as [0.1, 0.01])");
    } else if (p.log()) {
      add(at + ".log", "is for a range (min, max)");
    }
    combinations *= std::max(1, p.values_size());
  }
  if (!random && sw.trials() != 0) {
    add("trials", "is for sampling: random (a grid runs every combination)");
  } else if (random && (sw.trials() < 1 || sw.trials() > kMaxSweepTrials)) {
    add("trials", sw.trials() == 0 ? "missing (how many trials to draw, 1 to " +
                                         std::to_string(kMaxSweepTrials) + ")"
                                   : "must be between 1 and " + std::to_string(kMaxSweepTrials) +
                                         ", got " + std::to_string(sw.trials()));
  }
  if (!random && sw.has_seed()) add("seed", "is for sampling: random");
  if (!random && combinations > kMaxSweepTrials) {
    add("parameters", "make " + ShortNumber(combinations) + " combinations; at most " +
                          std::to_string(kMaxSweepTrials) +
                          " trials (use sampling: random with trials)");
  }
  if (!sw.metric().empty() && !IsMetricName(sw.metric(), kMaxSweepMetricBytes)) {
    add("metric", QuoteForMessage(sw.metric()) +
                      " is not a metric name (1-64 of [A-Za-z0-9_.-], as " +
                      "test_accuracy or loss)");
  }
  if (sw.goal().empty()) {
    if (!sw.metric().empty() && sw.metric() != "loss") {
      add("goal", "missing (max: more " + sw.metric() + " is better, or min)");
    }
  } else if (sw.goal() != "max" && sw.goal() != "min") {
    add("goal", "must be one of max, min, got " + QuoteForMessage(sw.goal()));
  }
  if (sw.has_max_parallel() && (sw.max_parallel() < 1 || sw.max_parallel() > kMaxSweepParallel)) {
    add("max_parallel", "must be between 1 and " + std::to_string(kMaxSweepParallel) + ", got " +
                            std::to_string(sw.max_parallel()));
  }
  const bool asha = sw.early_stop() == "asha";
  if (!sw.early_stop().empty() && sw.early_stop() != "none" && !asha) {
    add("early_stop", "must be one of none, asha, got " + QuoteForMessage(sw.early_stop()));
  }
  if (sw.has_asha() && !asha) {
    add("asha", "is for early_stop: asha");
  } else if (asha) {
    const v1::AshaSpec& a = sw.asha();
    if (a.has_min_steps() && (a.min_steps() < 1 || a.min_steps() > kMaxAshaMinSteps)) {
      add("asha.min_steps", "must be between 1 and " + std::to_string(kMaxAshaMinSteps) + ", got " +
                                std::to_string(a.min_steps()));
    }
    if (a.has_reduction_factor() && (a.reduction_factor() < kMinAshaReductionFactor ||
                                     a.reduction_factor() > kMaxAshaReductionFactor)) {
      add("asha.reduction_factor", "must be between " + std::to_string(kMinAshaReductionFactor) +
                                       " and " + std::to_string(kMaxAshaReductionFactor) +
                                       ", got " + std::to_string(a.reduction_factor()));
    }
  }
  return out;
}

std::vector<TrialValues> SweepTrialValues(const v1::SweepSpec& sweep) {
  std::vector<TrialValues> out;
  const int n = sweep.parameters_size();
  if (n == 0) return out;
  if (sweep.sampling() != "random") {
    std::vector<int> at(static_cast<size_t>(n), 0);
    for (const v1::SweepParameter& p : sweep.parameters()) {
      if (p.values_size() == 0) return out;
    }
    while (true) {
      TrialValues trial;
      for (int i = 0; i < n; ++i) {
        v1::TrialParameter& t = trial.emplace_back();
        t.set_path(sweep.parameters(i).path());
        t.set_value(sweep.parameters(i).values(at[static_cast<size_t>(i)]));
      }
      out.push_back(std::move(trial));
      int i = n - 1;  // the last parameter varies fastest
      while (i >= 0 && ++at[static_cast<size_t>(i)] == sweep.parameters(i).values_size()) {
        at[static_cast<size_t>(i)] = 0;
        --i;
      }
      if (i < 0 || out.size() >= static_cast<size_t>(kMaxSweepTrials)) break;
    }
    return out;
  }
  // mt19937_64's sequence is fixed by the standard; the draws below use only its raw output
  // (the standard's distributions may differ between library versions).
  std::mt19937_64 rng(static_cast<uint64_t>(ResolveSweep(sweep).seed));
  const auto unit = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };  // [0, 1)
  const int trials = std::min(sweep.trials(), kMaxSweepTrials);
  for (int k = 0; k < trials; ++k) {
    TrialValues trial;
    for (const v1::SweepParameter& p : sweep.parameters()) {
      v1::TrialParameter& t = trial.emplace_back();
      t.set_path(p.path());
      if (p.values_size() > 0) {
        t.set_value(p.values(static_cast<int>(rng() % static_cast<uint64_t>(p.values_size()))));
        continue;
      }
      const double u = unit();
      const double v =
          p.log() ? std::exp(std::log(p.min()) + u * (std::log(p.max()) - std::log(p.min())))
                  : p.min() + u * (p.max() - p.min());
      char text[32];
      std::snprintf(text, sizeof(text), "%.6g", v);
      t.set_value(text);
    }
    out.push_back(std::move(trial));
  }
  return out;
}

std::string TrialSet(const v1::TrialParameter& p) { return p.path() + "=" + p.value(); }

std::string DescribeTrial(const TrialValues& values) {
  std::string out;
  for (const v1::TrialParameter& p : values) out += (out.empty() ? "" : " ") + TrialSet(p);
  return out;
}

Status AddSweepFlag(const std::string& flag, v1::SweepSpec* sweep) {
  const size_t eq = flag.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
    return Status::InvalidArgument("--sweep " + QuoteForMessage(flag) +
                                   ": expected PATH=V1,V2,..., as trainer.lr=0.1,0.01,0.001");
  }
  v1::SweepParameter* p = sweep->add_parameters();
  p->set_path(flag.substr(0, eq));
  const std::string values = flag.substr(eq + 1);
  for (size_t start = 0;;) {
    const size_t comma = values.find(',', start);
    const std::string value =
        values.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (value.empty()) {
      return Status::InvalidArgument("--sweep " + QuoteForMessage(flag) + ": a value is empty");
    }
    p->add_values(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Status::Ok();
}

std::string MetricText(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return text;
}

}  // namespace convoy

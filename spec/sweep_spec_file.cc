#include "spec/sweep_spec_file.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <charconv>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "spec/job_spec.h"
#include "spec/spec_text.h"

namespace convoy {
namespace {

constexpr char kTrialSource[] = "trial";

// The lines of a failed OverrideJobSpec or validation, without the "--set P=V: " or
// "trial: " that starts them (the caller names the field instead).
std::vector<std::string> Lines(const Status& st, const std::vector<std::string>& sets) {
  std::vector<std::string> out;
  const std::string& m = st.message();
  for (size_t start = 0; start <= m.size();) {
    const size_t nl = m.find('\n', start);
    std::string line = m.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    bool cut = false;
    for (const std::string& set : sets) {
      const std::string label = "--set " + spec_internal::OneLine(set) + ": ";
      if (line.compare(0, label.size(), label) == 0) {
        line = line.substr(label.size());
        cut = true;
        break;
      }
    }
    const std::string source = std::string(kTrialSource) + ": ";
    if (!cut && line.compare(0, source.size(), source) == 0) line = line.substr(source.size());
    if (!line.empty()) out.push_back(line);
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

// Whether an override's error is about the path rather than the value.
bool IsPathError(const std::string& line) {
  return line.find("unknown field") != std::string::npos ||
         line.find("expected a mapping") != std::string::npos ||
         line.find("is not a field") != std::string::npos;
}

// Fields of `base` that `trial` lacks although no value was applied to them: the round trip
// through the override's tree did not carry them (a field it does not write); kept as they
// were.
void KeepUncarried(const v1::JobSpec& base, const TrialValues& values, v1::JobSpec* trial) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = base.GetReflection();
  const google::protobuf::Descriptor* d = base.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* fd = d->field(i);
    const bool in_base = fd->is_repeated() ? r->FieldSize(base, fd) > 0 : r->HasField(base, fd);
    const bool in_trial =
        fd->is_repeated() ? r->FieldSize(*trial, fd) > 0 : r->HasField(*trial, fd);
    if (!in_base || in_trial) continue;
    bool swept = false;
    for (const v1::TrialParameter& p : values) {
      const std::string top = p.path().substr(0, p.path().find('.'));
      swept = swept || fd->name().compare(0, top.size(), top) == 0;
    }
    if (swept) continue;
    if (fd->is_repeated()) {
      for (int j = 0; j < r->FieldSize(base, fd); ++j) {
        if (fd->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          r->AddMessage(trial, fd)->CopyFrom(r->GetRepeatedMessage(base, fd, j));
        } else if (fd->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
          r->AddString(trial, fd, r->GetRepeatedString(base, fd, j));
        }
      }
    } else if (fd->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      r->MutableMessage(trial, fd)->CopyFrom(r->GetMessage(base, fd));
    } else {
      switch (fd->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          r->SetInt32(trial, fd, r->GetInt32(base, fd));
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          r->SetInt64(trial, fd, r->GetInt64(base, fd));
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          r->SetDouble(trial, fd, r->GetDouble(base, fd));
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          r->SetBool(trial, fd, r->GetBool(base, fd));
          break;
        case FieldDescriptor::CPPTYPE_STRING:
          r->SetString(trial, fd, r->GetString(base, fd));
          break;
        case FieldDescriptor::CPPTYPE_ENUM:
          r->SetEnumValue(trial, fd, r->GetEnumValue(base, fd));
          break;
        default:
          break;
      }
    }
  }
}

}  // namespace

StatusOr<v1::JobSpec> TrialSpec(const v1::JobSpec& spec, const TrialValues& values) {
  v1::JobSpec base = spec;
  base.clear_sweep();
  base.clear_after();
  std::vector<std::string> sets;
  sets.reserve(values.size());
  for (const v1::TrialParameter& p : values) sets.push_back(TrialSet(p));
  auto trial = OverrideJobSpec(base, sets, kTrialSource);
  if (!trial.ok()) return trial.status();
  KeepUncarried(base, values, &*trial);
  return trial;
}

StatusOr<std::vector<SweepTrial>> ExpandSweep(const v1::JobSpec& spec) {
  CONVOY_RETURN_IF_ERROR(ValidateJobSpec(spec));
  std::vector<std::string> problems;
  const v1::SweepSpec& sw = spec.sweep();
  // Each value alone first, so that a problem names its parameter and value.
  for (int i = 0; i < sw.parameters_size(); ++i) {
    const v1::SweepParameter& p = sw.parameters(i);
    const std::string at = "sweep.parameters[" + std::to_string(i) + "]";
    std::vector<std::pair<std::string, std::string>> tries;  // field, value
    for (int j = 0; j < p.values_size(); ++j) {
      tries.emplace_back(at + ".values[" + std::to_string(j) + "]", p.values(j));
    }
    char text[32];
    if (p.has_min()) {
      std::snprintf(text, sizeof(text), "%.6g", p.min());
      tries.emplace_back(at + ".min", text);
    }
    if (p.has_max()) {
      std::snprintf(text, sizeof(text), "%.6g", p.max());
      tries.emplace_back(at + ".max", text);
    }
    std::set<std::string> tried;
    for (const auto& [field, value] : tries) {
      if (!tried.insert(value).second) continue;
      v1::TrialParameter one;
      one.set_path(p.path());
      one.set_value(value);
      auto trial = TrialSpec(spec, {one});
      if (trial.ok()) continue;
      const std::vector<std::string> lines = Lines(trial.status(), {TrialSet(one)});
      if (!lines.empty() && IsPathError(lines[0])) {
        problems.push_back(at + ".path: " + lines[0]);
        break;  // every value fails alike
      }
      for (const std::string& line : lines) problems.push_back(field + ": " + line);
    }
  }
  if (!problems.empty()) return Status::InvalidArgument(JoinSpecProblemLines(problems, ""));
  std::vector<SweepTrial> out;
  const std::vector<TrialValues> all = SweepTrialValues(sw);
  out.reserve(all.size());
  for (size_t k = 0; k < all.size(); ++k) {
    auto trial = TrialSpec(spec, all[k]);
    if (!trial.ok()) {
      std::vector<std::string> sets;
      for (const v1::TrialParameter& p : all[k]) sets.push_back(TrialSet(p));
      for (const std::string& line : Lines(trial.status(), sets)) {
        problems.push_back("sweep: trial " + std::to_string(k + 1) + " (" + DescribeTrial(all[k]) +
                           "): " + line);
      }
      continue;
    }
    out.push_back({all[k], std::move(*trial)});
  }
  if (!problems.empty()) return Status::InvalidArgument(JoinSpecProblemLines(problems, ""));
  return out;
}

namespace spec_internal {
namespace {

// Reads one `sweep:` mapping; each error is kept and reading goes on with the next field.
class SweepReader {
 public:
  SweepReader(const std::string& field, v1::SweepSpec* out) : prefix_(field), out_(out) {}

  SectionRead Read(const YAML::Node& node) {
    if (!node.IsMap()) {
      Error(prefix_, node,
            "expected a mapping (parameters, metric, goal, ...), got " + Describe(node));
      return std::move(read_);
    }
    Fields(node, prefix_,
           {"parameters", "metric", "goal", "max_parallel", "sampling", "trials", "seed",
            "early_stop", "asha"},
           [&](const std::string& key, const YAML::Node& v, const std::string& f) {
             if (key == "parameters") {
               Parameters(v, f);
             } else if (key == "metric") {
               if (auto t = Text(v, f)) out_->set_metric(*t);
             } else if (key == "goal") {
               if (auto t = Text(v, f)) out_->set_goal(*t);
             } else if (key == "sampling") {
               if (auto t = Text(v, f)) out_->set_sampling(*t);
             } else if (key == "early_stop") {
               if (auto t = Text(v, f)) out_->set_early_stop(*t);
             } else if (key == "max_parallel") {
               if (auto n = Int<int32_t>(v, f)) out_->set_max_parallel(*n);
             } else if (key == "trials") {
               if (auto n = Int<int32_t>(v, f)) out_->set_trials(*n);
             } else if (key == "seed") {
               if (auto n = Int<int64_t>(v, f)) out_->set_seed(*n);
             } else if (key == "asha") {
               v1::AshaSpec* a = out_->mutable_asha();
               if (v.IsNull()) return;
               Fields(v, f, {"min_steps", "reduction_factor"},
                      [&](const std::string& k, const YAML::Node& av, const std::string& af) {
                        if (k == "min_steps") {
                          if (auto n = Int<int64_t>(av, af)) a->set_min_steps(*n);
                        } else if (auto n = Int<int32_t>(av, af)) {
                          a->set_reduction_factor(*n);
                        }
                      });
             }
           });
    return std::move(read_);
  }

 private:
  using FieldFn =
      std::function<void(const std::string& key, const YAML::Node& value, const std::string& f)>;

  void Error(const std::string& field, const YAML::Node& at, const std::string& message) {
    read_.errors.push_back({field, message, at.Mark()});
  }

  // Calls `fn` for each key of `map` in `known`; unknown, duplicate and non-text keys are
  // errors.
  void Fields(const YAML::Node& map, const std::string& prefix, const std::set<std::string>& known,
              const FieldFn& fn) {
    if (!map.IsMap()) {
      Error(prefix, map, "expected a mapping, got " + Describe(map));
      return;
    }
    std::set<std::string> seen;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) {
        Error(prefix, kv.first, "keys must be plain names, got " + Describe(kv.first));
        continue;
      }
      const std::string& key = kv.first.Scalar();
      const std::string f = prefix + "." + key;
      read_.marks[f] = kv.second.IsNull() ? kv.first.Mark() : kv.second.Mark();
      if (!seen.insert(key).second) {
        Error(f, kv.first, "appears twice");
      } else if (known.count(key) == 0) {
        std::string names;
        std::string closest;
        for (const std::string& k : known) {
          names += (names.empty() ? "" : ", ") + k;
          if (closest.empty() && EditDistance(key, k) <= 2) closest = k;
        }
        Error(f, kv.first,
              closest.empty() ? "unknown field (known: " + names + ")"
                              : "unknown field; did you mean '" + closest + "'?");
      } else {
        fn(key, kv.second, f);
      }
    }
  }

  std::optional<std::string> Text(const YAML::Node& n, const std::string& f) {
    if (!n.IsScalar()) {
      Error(f, n, "expected a string, got " + Describe(n));
      return std::nullopt;
    }
    return n.Scalar();
  }

  template <typename T>
  std::optional<T> Int(const YAML::Node& n, const std::string& f) {
    T value = 0;
    if (n.IsScalar() && !IsTextScalar(n)) {
      const std::string& s = n.Scalar();
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
      if (ec == std::errc::result_out_of_range) {
        Error(f, n, Describe(n) + " is out of range for an integer");
        return std::nullopt;
      }
      if (ec == std::errc() && ptr == s.data() + s.size()) return value;
    }
    Error(f, n, "expected an integer, got " + Describe(n));
    return std::nullopt;
  }

  std::optional<double> Real(const YAML::Node& n, const std::string& f) {
    double value = 0;
    if (n.IsScalar() && !IsTextScalar(n)) {
      const std::string& s = n.Scalar();
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
      if (ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(value)) return value;
    }
    Error(f, n, "expected a finite number, got " + Describe(n));
    return std::nullopt;
  }

  // A value as `--set` reads it: a scalar as written, a list or mapping as flow YAML.
  static std::string ValueText(const YAML::Node& n) {
    if (n.IsScalar()) return n.Scalar();
    if (n.IsNull()) return "";
    YAML::Emitter e;
    e.SetMapFormat(YAML::Flow);
    e.SetSeqFormat(YAML::Flow);
    e << n;
    return e.c_str();
  }

  void Values(const YAML::Node& n, const std::string& f, v1::SweepParameter* p) {
    if (!n.IsSequence()) {
      Error(f, n, "expected a list of values, as [0.1, 0.01], got " + Describe(n));
      return;
    }
    for (size_t j = 0; j < n.size(); ++j) {
      read_.marks[f + "[" + std::to_string(j) + "]"] = n[j].Mark();
      p->add_values(ValueText(n[j]));
    }
  }

  // {values: [...]} or {min: X, max: Y, log: true}, and `path` in the list form.
  void Parameter(const YAML::Node& n, const std::string& f, bool with_path, v1::SweepParameter* p) {
    std::set<std::string> known = {"values", "min", "max", "log"};
    if (with_path) known.insert("path");
    Fields(n, f, known, [&](const std::string& key, const YAML::Node& v, const std::string& kf) {
      if (key == "path") {
        if (auto t = Text(v, kf)) p->set_path(*t);
      } else if (key == "values") {
        Values(v, kf, p);
      } else if (key == "min") {
        if (auto x = Real(v, kf)) p->set_min(*x);
      } else if (key == "max") {
        if (auto x = Real(v, kf)) p->set_max(*x);
      } else if (v.IsScalar() && !IsTextScalar(v) &&
                 (v.Scalar() == "true" || v.Scalar() == "false")) {
        p->set_log(v.Scalar() == "true");
      } else {
        Error(kf, v, "expected true or false, got " + Describe(v));
      }
    });
  }

  void Parameters(const YAML::Node& n, const std::string& f) {
    if (n.IsSequence()) {  // [{path: trainer.lr, values: [...]}, ...]
      for (size_t i = 0; i < n.size(); ++i) {
        const std::string at = f + "[" + std::to_string(i) + "]";
        read_.marks[at] = n[i].Mark();
        Parameter(n[i], at, /*with_path=*/true, out_->add_parameters());
      }
      return;
    }
    if (!n.IsMap()) {
      Error(f, n,
            "expected a mapping of spec paths to values, as {trainer.lr: [0.1, 0.01]}, got " +
                Describe(n));
      return;
    }
    size_t i = 0;
    for (const auto& kv : n) {
      const std::string at = f + "[" + std::to_string(i++) + "]";
      v1::SweepParameter* p = out_->add_parameters();
      read_.marks[at] = kv.first.Mark();
      read_.marks[at + ".path"] = kv.first.Mark();
      if (!kv.first.IsScalar()) {
        Error(at + ".path", kv.first, "expected a spec path, got " + Describe(kv.first));
        continue;
      }
      p->set_path(kv.first.Scalar());
      if (kv.second.IsMap()) {
        Parameter(kv.second, at, /*with_path=*/false, p);
      } else {
        read_.marks[at + ".values"] = kv.second.Mark();
        Values(kv.second, at + ".values", p);
      }
    }
  }

  const std::string prefix_;
  v1::SweepSpec* out_;
  SectionRead read_;
};

}  // namespace

SectionRead ReadSweepSection(const YAML::Node& node, const std::string& field, v1::SweepSpec* out) {
  return SweepReader(field, out).Read(node);
}

}  // namespace spec_internal
}  // namespace convoy

#include "common/job_spec.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "common/job_spec_validation.h"

namespace convoy {
namespace {

// Thrown inside this file only; ParseJobSpec turns it into a Status.
struct SpecError {
  std::string field;
  std::string message;
};

[[noreturn]] void Fail(const std::string& field, const std::string& message) {
  throw SpecError{field, message};
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return (node.Tag() == "!" ? "the string '" : "'") + node.Scalar() + "'";
  }
}

// A scalar written without quotes (quoted scalars are strings in YAML and JSON).
bool IsPlainScalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() != "!"; }

int64_t ToInt(const YAML::Node& node, const std::string& field, int64_t lo, int64_t hi) {
  if (!IsPlainScalar(node)) Fail(field, "expected an integer, got " + Describe(node));
  const std::string& s = node.Scalar();
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range) Fail(field, "'" + s + "' is out of range");
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    Fail(field, "expected an integer, got " + Describe(node));
  }
  if (value < lo || value > hi) {
    Fail(field,
         "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + s);
  }
  return value;
}

double ToDouble(const YAML::Node& node, const std::string& field) {
  if (!IsPlainScalar(node)) Fail(field, "expected a number, got " + Describe(node));
  const std::string& s = node.Scalar();
  double value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(value)) {
    Fail(field, "expected a number, got " + Describe(node));
  }
  return value;
}

std::string ToString(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) Fail(field, "expected a string, got " + Describe(node));
  return node.Scalar();
}

template <typename Add>
void ToStringList(const YAML::Node& node, const std::string& field, Add add) {
  if (!node.IsSequence()) Fail(field, "expected a list of strings, got " + Describe(node));
  for (size_t i = 0; i < node.size(); ++i) {
    add(ToString(node[i], field + "[" + std::to_string(i) + "]"));
  }
}

using Handler = std::function<void(const YAML::Node&, const std::string& field)>;

// Calls the handler of each key of `map`; unknown and duplicate keys are errors.
void ForEachField(const YAML::Node& map, const std::string& prefix,
                  const std::map<std::string, Handler>& handlers) {
  if (!map.IsMap()) {
    Fail(prefix.empty() ? "spec" : prefix, "expected a mapping, got " + Describe(map));
  }
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    const std::string field = prefix.empty() ? key : prefix + "." + key;
    if (!seen.insert(key).second) Fail(field, "appears twice");
    auto it = handlers.find(key);
    if (it == handlers.end()) {
      std::string known;
      for (const auto& [name, h] : handlers) known += (known.empty() ? "" : ", ") + name;
      Fail(field, "unknown field (known: " + known + ")");
    }
    it->second(kv.second, field);
  }
}

void ParseTrainer(const YAML::Node& node, const std::string& prefix, v1::TrainerSpec* t) {
  constexpr int64_t kBig = int64_t{1} << 40;
  ForEachField(
      node, prefix,
      {
          {"model", [t](auto& n, auto& f) { t->set_model(ToString(n, f)); }},
          {"epochs", [t](auto& n, auto& f) { t->set_epochs(ToInt(n, f, 1, 10000)); }},
          {"max_steps", [t](auto& n, auto& f) { t->set_max_steps(ToInt(n, f, 0, kBig)); }},
          {"batch_size", [t](auto& n, auto& f) { t->set_batch_size(ToInt(n, f, 1, 65536)); }},
          {"lr", [t](auto& n, auto& f) { t->set_lr(ToDouble(n, f)); }},
          {"momentum", [t](auto& n, auto& f) { t->set_momentum(ToDouble(n, f)); }},
          {"optimizer", [t](auto& n, auto& f) { t->set_optimizer(ToString(n, f)); }},
          {"lr_schedule", [t](auto& n, auto& f) { t->set_lr_schedule(ToString(n, f)); }},
          {"clip_grad_norm", [t](auto& n, auto& f) { t->set_clip_grad_norm(ToDouble(n, f)); }},
          {"accumulate", [t](auto& n, auto& f) { t->set_accumulate(ToInt(n, f, 1, 1024)); }},
          {"bucket_mb", [t](auto& n, auto& f) { t->set_bucket_mb(ToDouble(n, f)); }},
          {"checkpoint_every",
           [t](auto& n, auto& f) { t->set_checkpoint_every(ToInt(n, f, 0, kBig)); }},
          {"data_dir", [t](auto& n, auto& f) { t->set_data_dir(ToString(n, f)); }},
          {"seed", [t](auto& n, auto& f) { t->set_seed(ToInt(n, f, 0, kBig)); }},
          {"extra_args",
           [t](auto& n, auto& f) {
             ToStringList(n, f, [t](std::string s) { t->add_extra_args(std::move(s)); });
           }},
      });
}

v1::JobSpec ParseRoot(const YAML::Node& root) {
  v1::JobSpec spec;
  v1::JobSpec* s = &spec;
  auto elastic = [](auto&, const std::string& f) {
    Fail(f, "elastic jobs are not supported yet; use nodes");
  };
  ForEachField(
      root, "",
      {
          {"name", [s](auto& n, auto& f) { s->set_name(ToString(n, f)); }},
          {"nodes", [s](auto& n, auto& f) { s->set_nodes(ToInt(n, f, 1, kMaxNodes)); }},
          {"min_nodes", elastic},
          {"max_nodes", elastic},
          {"procs_per_node",
           [s](auto& n, auto& f) {
             if (n.IsScalar() && n.Scalar() == "gpu") {
               s->set_procs_per_node_gpu(true);
             } else if (n.IsScalar() && n.Tag() == "!") {
               Fail(f, "expected an integer or \"gpu\", got " + Describe(n));
             } else {
               s->set_procs_per_node(ToInt(n, f, 1, kMaxProcsPerNode));
             }
           }},
          {"backend", [s](auto& n, auto& f) { s->set_backend(ToString(n, f)); }},
          {"trainer",
           [s](auto& n, auto& f) {
             if (n.IsNull()) {
               s->mutable_trainer();
               return;
             }
             ParseTrainer(n, f, s->mutable_trainer());
           }},
          {"command",
           [s](auto& n, auto& f) {
             if (n.IsScalar()) {
               Fail(f, "expected a list of strings (an argv, run without a shell), got " +
                           Describe(n));
             }
             ToStringList(n, f, [s](std::string a) { s->add_command(std::move(a)); });
           }},
          {"env",
           [s](auto& n, auto& f) {
             if (n.IsNull()) return;
             if (!n.IsMap()) Fail(f, "expected a mapping of names to values, got " + Describe(n));
             std::set<std::string> seen;
             for (const auto& kv : n) {
               const std::string key = kv.first.Scalar();
               if (!seen.insert(key).second) Fail(f + "." + key, "appears twice");
               (*s->mutable_env())[key] = ToString(kv.second, f + "." + key);
             }
           }},
          {"max_restarts",
           [s](auto& n, auto& f) { s->set_max_restarts(ToInt(n, f, 0, kMaxRestarts)); }},
          {"checkpoint_dir", [s](auto& n, auto& f) { s->set_checkpoint_dir(ToString(n, f)); }},
          {"hang_timeout",
           [s](auto& n, auto& f) { s->set_hang_timeout_s(ToInt(n, f, 0, kMaxHangTimeoutS)); }},
          {"working_dir", [s](auto& n, auto& f) { s->set_working_dir(ToString(n, f)); }},
      });
  return spec;
}

}  // namespace

StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& source) {
  if (text.size() > kMaxSpecBytes) {
    return Status::InvalidArgument(source + ": the spec is " + std::to_string(text.size()) +
                                   " bytes; at most " + std::to_string(kMaxSpecBytes) + " allowed");
  }
  v1::JobSpec spec;
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsDefined() || root.IsNull()) {
      return Status::InvalidArgument(source + ": the spec is empty");
    }
    spec = ParseRoot(root);
  } catch (const SpecError& e) {
    return Status::InvalidArgument(source + ": " + e.field + ": " + e.message);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source + ": line " + std::to_string(e.mark.line + 1) +
                                   ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  Status st = ValidateJobSpec(spec);
  if (!st.ok()) return Status::InvalidArgument(source + ": " + st.message());
  return spec;
}

StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(path + ": cannot open the spec file");
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxSpecBytes) {
      return Status::InvalidArgument(path + ": larger than " + std::to_string(kMaxSpecBytes) +
                                     " bytes");
    }
  }
  if (in.bad()) return Status::InvalidArgument(path + ": cannot read the spec file");
  return ParseJobSpec(text, path);
}

}  // namespace convoy

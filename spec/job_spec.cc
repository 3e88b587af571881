#include "spec/job_spec.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <sys/stat.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "common/util.h"
#include "spec/dependency_spec.h"
#include "spec/job_spec_validation.h"
#include "spec/spec_overrides.h"
#include "spec/spec_text.h"
#include "spec/sweep_spec_file.h"
#include "spec/trainer_spec_env.h"

namespace convoy {
namespace {

// Thrown inside this file only; the reader collects them and ParseJobSpec reports them all.
struct SpecError {
  std::string field;
  std::string message;
  YAML::Mark mark = YAML::Mark::null_mark();
  bool fatal = false;  // stops reading the rest of the spec
};

using namespace spec_internal;

// Reads one spec document into a JobSpec, remembering where each field was written so that
// errors found later (by ValidateJobSpec) can point at the line too. A field that cannot be
// read is left out and its error kept; reading goes on with the next field.
class SpecReader {
 public:
  v1::JobSpec Read(const YAML::Node& root) {
    v1::JobSpec spec;
    try {
      ReadRoot(root, &spec);
    } catch (const SpecError& e) {  // not a mapping, or a fatal error
      errors_.push_back(e);
      stopped_ = true;
    }
    return spec;
  }

  // The errors found while reading, in the order of the text.
  const std::vector<SpecError>& errors() const { return errors_; }
  // True when reading stopped before the end (the spec is not a mapping, or expands too far).
  bool stopped() const { return stopped_; }
  // Whether the text has a key for `field` ("nodes", "trainer.lr").
  bool Written(const std::string& field) const { return written_.count(field) != 0; }

  // Where `field` was written, or the null mark.
  YAML::Mark MarkOf(const std::string& field) const {
    auto it = marks_.find(field);
    return it == marks_.end() ? YAML::Mark::null_mark() : it->second;
  }

 private:
  using Handler = std::function<void(const YAML::Node&, const std::string& field)>;

  [[noreturn]] void Fail(const std::string& field, const std::string& message) const {
    throw SpecError{field, message, MarkOf(field)};
  }

  // Runs `read`; an error it throws is kept, and reading goes on (unless it is fatal).
  template <typename Read>
  void Collect(Read read) {
    try {
      read();
    } catch (const SpecError& e) {
      if (e.fatal) throw;
      errors_.push_back(e);
    }
  }

  template <typename T>
  T ToInt(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar() || IsTextScalar(node)) {
      Fail(field, "expected an integer, got " + Describe(node));
    }
    const std::string& s = node.Scalar();
    T value = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec == std::errc::result_out_of_range) {
      Fail(field, Describe(node) + " is out of range for an integer");
    }
    if (ec != std::errc() || ptr != s.data() + s.size()) {
      Fail(field, "expected an integer, got " + Describe(node));
    }
    return value;
  }

  double ToDouble(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar() || IsTextScalar(node)) {
      Fail(field, "expected a number, got " + Describe(node));
    }
    const std::string& s = node.Scalar();
    double value = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || ptr != s.data() + s.size()) {
      Fail(field, "expected a number, got " + Describe(node));
    }
    if (!std::isfinite(value)) Fail(field, "expected a finite number, got '" + s + "'");
    return value;
  }

  // Any scalar, as written (numbers and booleans become their text).
  std::string ToString(const YAML::Node& node, const std::string& field) {
    if (!node.IsScalar()) Fail(field, "expected a string, got " + Describe(node));
    // Aliases can repeat one long scalar many times: bound what the spec expands to.
    expanded_bytes_ += node.Scalar().size();
    if (expanded_bytes_ > kMaxSpecBytes) {
      throw SpecError{field,
                      "the spec expands to more than " + std::to_string(kMaxSpecBytes) + " bytes",
                      MarkOf(field), /*fatal=*/true};
    }
    return node.Scalar();
  }

  template <typename Add>
  void ToStringList(const YAML::Node& node, const std::string& field, Add add) {
    if (!node.IsSequence()) Fail(field, "expected a list of strings, got " + Describe(node));
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string item = field + "[" + std::to_string(i) + "]";
      marks_[item] = node[i].Mark();
      add(ToString(node[i], item));
    }
  }

  // Calls the handler of each key of `map`; unknown and duplicate keys are errors.
  void ForEachField(const YAML::Node& map, const std::string& prefix,
                    const std::map<std::string, Handler>& handlers) {
    const std::string what = prefix.empty() ? "spec" : prefix;
    if (!map.IsMap()) Fail(what, "expected a mapping, got " + Describe(map));
    std::set<std::string> seen;
    for (const auto& kv : map) {
      Collect([&] {
        if (!kv.first.IsScalar()) {
          marks_[what] = kv.first.Mark();
          Fail(what, "keys must be plain names, got " + Describe(kv.first));
        }
        const std::string& key = kv.first.Scalar();
        if (key.empty()) {
          marks_[what] = kv.first.Mark();
          Fail(what, "a key is empty");
        }
        const std::string field = prefix.empty() ? key : prefix + "." + key;
        marks_[field] = kv.first.Mark();
        if (!seen.insert(key).second) Fail(field, "appears twice");
        auto it = handlers.find(key);
        if (it == handlers.end()) Fail(field, UnknownField(key, handlers));
        written_.insert(field);
        if (!kv.second.IsNull()) marks_[field] = kv.second.Mark();  // null: keep the key's
        it->second(kv.second, field);
      });
    }
  }

  static std::string UnknownField(const std::string& key,
                                  const std::map<std::string, Handler>& handlers) {
    std::string known;
    std::string closest;
    size_t best = 3;  // suggest only names at most 2 edits away
    for (const auto& entry : handlers) {
      const std::string& name = entry.first;
      known += (known.empty() ? "" : ", ") + name;
      const size_t d = EditDistance(key, name);
      if (d < best) {
        best = d;
        closest = name;
      }
    }
    if (!closest.empty()) return "unknown field; did you mean '" + closest + "'?";
    return "unknown field (known: " + known + ")";
  }

  // Every field of TrainerSpec (or of another message of plain fields, such as
  // CheckpointPolicy), by protobuf reflection: a field added to the message is read under its
  // own name, with its type's checks, without a list to extend here. A message field is read
  // the same way, as a nested mapping.
  void ReadTrainer(const YAML::Node& node, const std::string& prefix,
                   google::protobuf::Message* t) {
    using google::protobuf::FieldDescriptor;
    const google::protobuf::Reflection* r = t->GetReflection();
    std::map<std::string, Handler> handlers;
    const google::protobuf::Descriptor* d = t->GetDescriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* fd = d->field(i);
      Handler read;
      if (fd->is_repeated()) {  // extra_args: a list of strings
        read = [this, r, t, fd](auto& n, auto& f) {
          ToStringList(n, f, [r, t, fd](std::string s) { r->AddString(t, fd, std::move(s)); });
        };
      } else {
        switch (fd->cpp_type()) {
          case FieldDescriptor::CPPTYPE_STRING:
            read = [this, r, t, fd](auto& n, auto& f) { r->SetString(t, fd, ToString(n, f)); };
            break;
          case FieldDescriptor::CPPTYPE_INT32:
            read = [this, r, t, fd](auto& n, auto& f) { r->SetInt32(t, fd, ToInt<int32_t>(n, f)); };
            break;
          case FieldDescriptor::CPPTYPE_INT64:
            read = [this, r, t, fd](auto& n, auto& f) { r->SetInt64(t, fd, ToInt<int64_t>(n, f)); };
            break;
          case FieldDescriptor::CPPTYPE_DOUBLE:
            read = [this, r, t, fd](auto& n, auto& f) { r->SetDouble(t, fd, ToDouble(n, f)); };
            break;
          case FieldDescriptor::CPPTYPE_MESSAGE:
            read = [this, r, t, fd](auto& n, auto& f) {
              google::protobuf::Message* m = r->MutableMessage(t, fd);
              if (!n.IsNull()) ReadTrainer(n, f, m);
            };
            break;
          default:  // no such field yet: one would need its reading written here
            read = [this, fd](auto&, auto& f) {
              Fail(f, "a " + std::string(fd->cpp_type_name()) + " field cannot be read yet");
            };
        }
      }
      handlers.emplace(fd->name(), std::move(read));
    }
    ForEachField(node, prefix, handlers);
  }

  void ReadEnv(const YAML::Node& node, const std::string& field, v1::JobSpec* s) {
    if (node.IsNull()) return;
    if (!node.IsMap()) Fail(field, "expected a mapping of names to values, got " + Describe(node));
    std::set<std::string> seen;
    for (const auto& kv : node) {
      Collect([&] {
        if (!kv.first.IsScalar()) Fail(field, "names must be plain strings");
        if (kv.first.Scalar().empty()) Fail(field, "a variable has an empty name");
        const std::string key = EnvFieldName(kv.first.Scalar());
        marks_[key] = kv.second.Mark();
        if (!seen.insert(kv.first.Scalar()).second) Fail(key, "appears twice");
        (*s->mutable_env())[kv.first.Scalar()] = ToString(kv.second, key);
      });
    }
  }

  // A size in bytes: a plain integer (bytes), or a number with a unit: Ki, Mi, Gi, Ti
  // (powers of 1024) or K, M, G, T (powers of 1000), as Kubernetes writes quantities.
  int64_t ToBytes(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) Fail(field, "expected a size such as 16Gi, got " + Describe(node));
    bool overflow = false;
    const std::optional<int64_t> bytes = ParseByteQuantity(node.Scalar(), &overflow);
    if (!bytes && !overflow) {
      Fail(field,
           "expected a size such as 16Gi, 512Mi or a number of bytes, got " + Describe(node));
    }
    // "4096" in quotes is text, not a number of bytes.
    if (IsTextScalar(node) && node.Scalar().find_first_not_of("0123456789") == std::string::npos) {
      Fail(field, "expected a size such as 16Gi, got " + Describe(node));
    }
    if (overflow) Fail(field, Describe(node) + " is out of range");
    return *bytes;
  }

  void ReadStringMap(const YAML::Node& node, const std::string& field,
                     google::protobuf::Map<std::string, std::string>* out) {
    if (node.IsNull()) return;
    if (!node.IsMap()) Fail(field, "expected a mapping of names to values, got " + Describe(node));
    std::set<std::string> seen;
    for (const auto& kv : node) {
      Collect([&] {
        if (!kv.first.IsScalar()) Fail(field, "names must be plain strings");
        if (kv.first.Scalar().empty()) Fail(field, "a name is empty");
        const std::string key = MapKeyFieldName(field, kv.first.Scalar());
        marks_[key] = kv.second.Mark();
        if (!seen.insert(kv.first.Scalar()).second) Fail(key, "appears twice");
        (*out)[kv.first.Scalar()] = ToString(kv.second, key);
      });
    }
  }

  // A section read by its own reader (spec/sweep_spec_file.h): its errors, and where its
  // fields were written.
  void AddSection(SectionRead read) {
    for (auto& [field, mark] : read.marks) marks_[field] = mark;
    for (SectionError& e : read.errors) errors_.push_back({e.field, e.message, e.mark});
  }

  bool ToBool(const YAML::Node& node, const std::string& field) const {
    if (node.IsScalar() && !IsTextScalar(node)) {
      if (node.Scalar() == "true") return true;
      if (node.Scalar() == "false") return false;
    }
    Fail(field, "expected true or false, got " + Describe(node));
  }

  // `after` (spec/dependency_spec.h): a list of {job: j-000004, when: succeeded|failed|ended}
  // (when defaults to succeeded), or of bare job ids.
  void ReadAfter(const YAML::Node& node, const std::string& field, v1::JobSpec* s) {
    if (node.IsNull()) return;
    if (!node.IsSequence()) {
      Fail(field,
           "expected a list of {job: j-..., when: succeeded|failed|ended}, got " + Describe(node));
    }
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string item = field + "[" + std::to_string(i) + "]";
      marks_[item] = marks_[item + ".job"] = node[i].Mark();
      v1::JobDependency* d = s->add_after();
      d->set_when(v1::DEPENDENCY_SUCCEEDED);
      Collect([&] {
        if (node[i].IsScalar()) {
          d->set_job_id(ToString(node[i], item + ".job"));
          return;
        }
        ForEachField(node[i], item,
                     {{"job", [&](auto& n, auto& f) { d->set_job_id(ToString(n, f)); }},
                      {"when", [&](auto& n, auto& f) {
                         const auto when = ParseConditionWord(ToString(n, f));
                         if (!when)
                           Fail(f, "must be succeeded, failed or ended, got " + Describe(n));
                         d->set_when(*when);
                       }}});
      });
    }
  }

  void ReadRoot(const YAML::Node& root, v1::JobSpec* s) {
    ForEachField(
        root, "",
        {
            {"name", [&](auto& n, auto& f) { s->set_name(ToString(n, f)); }},
            {"nodes", [&](auto& n, auto& f) { s->set_nodes(ToInt<int32_t>(n, f)); }},
            {"min_nodes", [&](auto& n, auto& f) { s->set_min_nodes(ToInt<int32_t>(n, f)); }},
            {"max_nodes", [&](auto& n, auto& f) { s->set_max_nodes(ToInt<int32_t>(n, f)); }},
            {"procs_per_node",
             [&](auto& n, auto& f) {
               if (n.IsScalar() && n.Scalar() == "gpu") {
                 s->set_procs_per_node_gpu(true);
               } else if (n.IsScalar() && IsTextScalar(n)) {
                 Fail(f, "expected an integer or \"gpu\", got " + Describe(n));
               } else {
                 s->set_procs_per_node(ToInt<int32_t>(n, f));
               }
             }},
            {"backend", [&](auto& n, auto& f) { s->set_backend(ToString(n, f)); }},
            {"trainer",
             [&](auto& n, auto& f) {
               s->mutable_trainer();  // `trainer:` alone means every default
               if (!n.IsNull()) ReadTrainer(n, f, s->mutable_trainer());
             }},
            {"command",
             [&](auto& n, auto& f) {
               if (n.IsScalar()) {
                 Fail(f, "expected a list of strings (an argv, run without a shell), got " +
                             Describe(n));
               }
               ToStringList(n, f, [s](std::string a) { s->add_command(std::move(a)); });
             }},
            {"env", [&](auto& n, auto& f) { ReadEnv(n, f, s); }},
            {"max_restarts", [&](auto& n, auto& f) { s->set_max_restarts(ToInt<int32_t>(n, f)); }},
            {"checkpoint_dir", [&](auto& n, auto& f) { s->set_checkpoint_dir(ToString(n, f)); }},
            {"hang_timeout",
             [&](auto& n, auto& f) { s->set_hang_timeout_s(ToInt<int32_t>(n, f)); }},
            {"working_dir", [&](auto& n, auto& f) { s->set_working_dir(ToString(n, f)); }},
            {"resume_from", [&](auto& n, auto& f) { s->set_resume_from(ToString(n, f)); }},
            {"priority", [&](auto& n, auto& f) { s->set_priority(ToInt<int32_t>(n, f)); }},
            {"max_runtime", [&](auto& n, auto& f) { s->set_max_runtime_s(ToInt<int64_t>(n, f)); }},
            {"preemptible", [&](auto& n, auto& f) { s->set_preemptible(ToBool(n, f)); }},
            {"gpus_per_proc",
             [&](auto& n, auto& f) { s->set_gpus_per_proc(ToInt<int32_t>(n, f)); }},
            {"cpus_per_proc",
             [&](auto& n, auto& f) { s->set_cpus_per_proc(ToInt<int32_t>(n, f)); }},
            {"memory_per_proc",
             [&](auto& n, auto& f) { s->set_memory_per_proc_bytes(ToBytes(n, f)); }},
            {"node_selector",
             [&](auto& n, auto& f) { ReadStringMap(n, f, s->mutable_node_selector()); }},
            {"resize_interval",
             [&](auto& n, auto& f) { s->set_resize_interval_s(ToInt<int32_t>(n, f)); }},
            // When nodes are sick (spec/progress_spec.h).
            {"straggler_factor",
             [&](auto& n, auto& f) { s->set_straggler_factor(ToDouble(n, f)); }},
            {"straggler_steps",
             [&](auto& n, auto& f) { s->set_straggler_steps(ToInt<int32_t>(n, f)); }},
            {"on_straggler", [&](auto& n, auto& f) { s->set_on_straggler(ToString(n, f)); }},
            {"hang_steps", [&](auto& n, auto& f) { s->set_hang_steps(ToInt<int32_t>(n, f)); }},
            // Checkpoints kept by policy (spec/checkpoint_spec.h).
            {"checkpoint",
             [&](auto& n, auto& f) {
               s->mutable_checkpoint();
               if (!n.IsNull()) ReadTrainer(n, f, s->mutable_checkpoint());
             }},
            {"resume_checkpoint",
             [&](auto& n, auto& f) { s->set_resume_checkpoint(ToString(n, f)); }},
            // Dependencies between jobs (spec/dependency_spec.h).
            {"after", [&](auto& n, auto& f) { ReadAfter(n, f, s); }},
            // Sweeps (spec/sweep_spec.h).
            {"sweep",
             [&](auto& n, auto& f) { AddSection(ReadSweepSection(n, f, s->mutable_sweep())); }},
        });
  }

  std::map<std::string, YAML::Mark> marks_;
  std::set<std::string> written_;
  std::vector<SpecError> errors_;
  bool stopped_ = false;
  size_t expanded_bytes_ = 0;
};

// Reads `root` (after applying `sets`) into a spec and validates it; every error, one a line.
StatusOr<v1::JobSpec> ReadSpecTree(YAML::Node root, const std::string& source,
                                   const std::vector<std::string>& sets) {
  std::vector<Override> applied;
  if (root.IsMap() && !sets.empty()) {
    const std::vector<std::string> errors = ApplyOverrides(root, sets, &applied);
    if (!errors.empty()) {
      return Status::InvalidArgument(JoinSpecProblemLines(errors, source + ": "));
    }
  }
  SpecReader reader;
  v1::JobSpec spec = reader.Read(root);
  std::vector<SpecError> errors = reader.errors();
  if (!reader.stopped()) {
    if (spec.backend().empty()) spec.set_backend("gloo");
    // A field that could not be read is not reported again (nor its list, for an item).
    std::set<std::string> unread;
    for (const SpecError& e : errors) {
      unread.insert(e.field.empty() || e.field.back() != ']'
                        ? e.field
                        : e.field.substr(0, e.field.rfind('[')));
    }
    const auto written = [&reader](const std::string& field) { return reader.Written(field); };
    for (SpecProblem& problem : FindSpecProblems(spec, written)) {
      if (UnderAny(unread, problem.field)) continue;
      errors.push_back({problem.field, problem.message, reader.MarkOf(problem.field)});
    }
  }
  if (errors.empty()) return spec;
  // Errors in the order of the text, then those with no place in it (a missing field), then
  // those of --set, in the order given.
  struct Line {
    int rank;  // 0: a place in the text, 1: none, 2: a --set
    YAML::Mark mark;
    size_t order;
    std::string text;
  };
  std::vector<Line> lines;
  for (const SpecError& e : errors) {
    // An unknown key is named as written: quote at most 128 bytes of it, on one line.
    const std::string field = OneLine(e.field, 128);
    if (const Override* o = OverrideOf(applied, e.field)) {
      const size_t order = static_cast<size_t>(o - applied.data());
      lines.push_back({2, e.mark, order, o->label + ": " + field + ": " + e.message});
    } else {
      lines.push_back({e.mark.is_null() ? 1 : 0, e.mark, lines.size(),
                       source + ":" + Where(e.mark) + " " + field + ": " + e.message});
    }
  }
  std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.rank == 0 && a.mark.line != b.mark.line) return a.mark.line < b.mark.line;
    if (a.rank == 0) return a.mark.column < b.mark.column;
    return a.rank == 2 && a.order < b.order;
  });
  std::vector<std::string> texts;
  texts.reserve(lines.size());
  for (Line& line : lines) texts.push_back(std::move(line.text));
  return Status::InvalidArgument(JoinSpecProblemLines(texts, source + ": "));
}

// The fields `t` sets (TrainerSpecValues: by reflection), as their text form writes them.
YAML::Node TrainerNode(const v1::TrainerSpec& t) {
  using google::protobuf::FieldDescriptor;
  YAML::Node n(YAML::NodeType::Map);
  for (const auto& [name, value] : TrainerSpecValues(t)) {
    const FieldDescriptor* fd = t.GetDescriptor()->FindFieldByName(name);
    const google::protobuf::Reflection* r = t.GetReflection();
    switch (fd->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        n[name] = r->GetInt32(t, fd);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        n[name] = r->GetInt64(t, fd);
        break;
      default:  // strings, and doubles as 17 digits (they read back exactly)
        n[name] = value;
    }
  }
  for (int i = 0; i < t.GetDescriptor()->field_count(); ++i) {  // extra_args: lists
    const FieldDescriptor* fd = t.GetDescriptor()->field(i);
    const int size = fd->is_repeated() ? t.GetReflection()->FieldSize(t, fd) : 0;
    if (size == 0) continue;
    YAML::Node items(YAML::NodeType::Sequence);
    for (int j = 0; j < size; ++j) items.push_back(t.GetReflection()->GetRepeatedString(t, fd, j));
    n[fd->name()] = items;
  }
  return n;
}

// `spec` as the tree its text form would read to (code_sha256, set by the CLI, is not part
// of it).
YAML::Node ToNode(const v1::JobSpec& s) {
  YAML::Node root(YAML::NodeType::Map);
  const auto text = [&root](const char* key, const std::string& value) {
    if (!value.empty()) root[key] = value;
  };
  const auto number = [&root](const char* key, int64_t value) {
    if (value != 0) root[key] = value;
  };
  text("name", s.name());
  number("nodes", s.nodes());
  number("min_nodes", s.min_nodes());
  number("max_nodes", s.max_nodes());
  if (s.procs_per_node_gpu()) {
    root["procs_per_node"] = "gpu";
  } else {
    number("procs_per_node", s.procs_per_node());
  }
  text("backend", s.backend());
  if (s.has_trainer()) root["trainer"] = TrainerNode(s.trainer());
  if (s.command_size() > 0) {
    YAML::Node argv(YAML::NodeType::Sequence);
    for (const auto& a : s.command()) argv.push_back(a);
    root["command"] = argv;
  }
  if (!s.env().empty()) {
    YAML::Node env(YAML::NodeType::Map);
    for (const auto& [k, v] : s.env()) env.force_insert(k, v);
    root["env"] = env;
  }
  number("max_restarts", s.max_restarts());
  text("checkpoint_dir", s.checkpoint_dir());
  number("hang_timeout", s.hang_timeout_s());
  text("working_dir", s.working_dir());
  text("resume_from", s.resume_from());
  number("priority", s.priority());
  number("max_runtime", s.max_runtime_s());
  if (s.has_preemptible()) root["preemptible"] = s.preemptible();
  number("gpus_per_proc", s.gpus_per_proc());
  number("cpus_per_proc", s.cpus_per_proc());
  number("memory_per_proc", s.memory_per_proc_bytes());
  if (!s.node_selector().empty()) {
    YAML::Node labels(YAML::NodeType::Map);
    for (const auto& [k, v] : s.node_selector()) labels.force_insert(k, v);
    root["node_selector"] = labels;
  }
  number("resize_interval", s.resize_interval_s());
  if (s.has_straggler_factor()) root["straggler_factor"] = s.straggler_factor();
  if (s.has_straggler_steps()) root["straggler_steps"] = s.straggler_steps();
  text("on_straggler", s.on_straggler());
  number("hang_steps", s.hang_steps());
  if (s.has_checkpoint()) {
    YAML::Node policy(YAML::NodeType::Map);
    policy["keep_last"] = s.checkpoint().keep_last();
    const v1::KeepBest& best = s.checkpoint().keep_best();
    if (s.checkpoint().has_keep_best()) {
      YAML::Node b(YAML::NodeType::Map);
      if (!best.metric().empty()) b["metric"] = best.metric();
      if (!best.goal().empty()) b["goal"] = best.goal();
      b["count"] = best.count();
      policy["keep_best"] = b;
    }
    root["checkpoint"] = policy;
  }
  text("resume_checkpoint", s.resume_checkpoint());
  if (s.after_size() > 0) {
    YAML::Node after(YAML::NodeType::Sequence);
    for (const v1::JobDependency& d : s.after()) {
      YAML::Node item(YAML::NodeType::Map);
      item["job"] = d.job_id();
      item["when"] = ConditionWord(ConditionOf(d));
      after.push_back(item);
    }
    root["after"] = after;
  }
  return root;
}

}  // namespace

StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& source,
                                   const std::vector<std::string>& sets) {
  if (text.size() > kMaxSpecBytes) {
    return Status::InvalidArgument(source + ": the spec is " + std::to_string(text.size()) +
                                   " bytes; at most " + std::to_string(kMaxSpecBytes) + " allowed");
  }
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    CONVOY_RETURN_IF_ERROR(CheckStrictJson(text, source));
  }
  YAML::Node root;
  try {
    const size_t docs = CountDocuments(text);
    if (docs > 1) {
      return Status::InvalidArgument(source + ": expected one YAML document, got " +
                                     std::to_string(docs));
    }
    root = docs == 0 ? YAML::Node() : YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source + ":" + Where(e.mark) +
                                   " invalid YAML: " + OneLine(e.msg, 200));
  }
  if (root.IsNull()) return Status::InvalidArgument(source + ": the spec is empty");
  return ReadSpecTree(root, source, sets);
}

StatusOr<v1::JobSpec> OverrideJobSpec(const v1::JobSpec& spec, const std::vector<std::string>& sets,
                                      const std::string& source) {
  auto out = ReadSpecTree(ToNode(spec), source, sets);
  if (out.ok() && !spec.code_sha256().empty()) out->set_code_sha256(spec.code_sha256());
  return out;
}

StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path,
                                      const std::vector<std::string>& sets) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) {
    return Status::InvalidArgument(path + ": cannot open the spec file: " + std::strerror(errno));
  }
  struct stat info {};
  if (fstat(fileno(file.get()), &info) != 0 || !S_ISREG(info.st_mode)) {
    return Status::InvalidArgument(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(info.st_size) > kMaxSpecBytes) {
    return Status::InvalidArgument(path + ": the spec file is " + std::to_string(info.st_size) +
                                   " bytes; at most " + std::to_string(kMaxSpecBytes) + " allowed");
  }
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), file.get())) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxSpecBytes) {  // it grew while being read
      return Status::InvalidArgument(path + ": larger than " + std::to_string(kMaxSpecBytes) +
                                     " bytes");
    }
  }
  if (std::ferror(file.get())) {
    return Status::InvalidArgument(path + ": cannot read the spec file: " + std::strerror(errno));
  }
  return ParseJobSpec(text, path, sets);
}

}  // namespace convoy

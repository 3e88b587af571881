#include "common/job_spec.h"

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

#include "common/job_spec_validation.h"
#include "common/util.h"

namespace convoy {
namespace {

// Thrown inside this file only; ParseJobSpec turns it into a Status.
struct SpecError {
  std::string field;
  std::string message;
  YAML::Mark mark = YAML::Mark::null_mark();
};

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default: {
      std::string text = node.Scalar();
      if (text.size() > 40) text = text.substr(0, 40) + "...";
      return (node.Tag() == "!" ? "the string '" : "'") + text + "'";
    }
  }
}

// A scalar written as text: quoted, or tagged !!str. Such a scalar is never a number.
bool IsTextScalar(const YAML::Node& node) {
  return node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str";
}

// Levenshtein distance, for "did you mean" hints on unknown fields.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "line:column: " for a mark, "" when the mark is unknown.
std::string Where(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ":";
}

// Reads one spec document into a JobSpec, remembering where each field was written so that
// errors found later (by ValidateJobSpec) can point at the line too.
class SpecReader {
 public:
  v1::JobSpec Read(const YAML::Node& root) {
    v1::JobSpec spec;
    ReadRoot(root, &spec);
    return spec;
  }

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
      Fail(field, "the spec expands to more than " + std::to_string(kMaxSpecBytes) + " bytes");
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
      if (!kv.second.IsNull()) marks_[field] = kv.second.Mark();  // null: keep the key's
      it->second(kv.second, field);
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

  void ReadTrainer(const YAML::Node& node, const std::string& prefix, v1::TrainerSpec* t) {
    ForEachField(
        node, prefix,
        {
            {"model", [&](auto& n, auto& f) { t->set_model(ToString(n, f)); }},
            {"epochs", [&](auto& n, auto& f) { t->set_epochs(ToInt<int32_t>(n, f)); }},
            {"max_steps", [&](auto& n, auto& f) { t->set_max_steps(ToInt<int64_t>(n, f)); }},
            {"batch_size", [&](auto& n, auto& f) { t->set_batch_size(ToInt<int32_t>(n, f)); }},
            {"lr", [&](auto& n, auto& f) { t->set_lr(ToDouble(n, f)); }},
            {"momentum", [&](auto& n, auto& f) { t->set_momentum(ToDouble(n, f)); }},
            {"optimizer", [&](auto& n, auto& f) { t->set_optimizer(ToString(n, f)); }},
            {"lr_schedule", [&](auto& n, auto& f) { t->set_lr_schedule(ToString(n, f)); }},
            {"clip_grad_norm", [&](auto& n, auto& f) { t->set_clip_grad_norm(ToDouble(n, f)); }},
            {"accumulate", [&](auto& n, auto& f) { t->set_accumulate(ToInt<int32_t>(n, f)); }},
            {"bucket_mb", [&](auto& n, auto& f) { t->set_bucket_mb(ToDouble(n, f)); }},
            {"checkpoint_every",
             [&](auto& n, auto& f) { t->set_checkpoint_every(ToInt<int64_t>(n, f)); }},
            {"data_dir", [&](auto& n, auto& f) { t->set_data_dir(ToString(n, f)); }},
            {"seed", [&](auto& n, auto& f) { t->set_seed(ToInt<int64_t>(n, f)); }},
            {"ddp", [&](auto& n, auto& f) { t->set_ddp(ToString(n, f)); }},
            {"allreduce", [&](auto& n, auto& f) { t->set_allreduce(ToString(n, f)); }},
            {"amp", [&](auto& n, auto& f) { t->set_amp(ToString(n, f)); }},
            {"snapshot_every",
             [&](auto& n, auto& f) { t->set_snapshot_every(ToInt<int64_t>(n, f)); }},
            {"extra_args",
             [&](auto& n, auto& f) {
               ToStringList(n, f, [t](std::string s) { t->add_extra_args(std::move(s)); });
             }},
        });
  }

  void ReadEnv(const YAML::Node& node, const std::string& field, v1::JobSpec* s) {
    if (node.IsNull()) return;
    if (!node.IsMap()) Fail(field, "expected a mapping of names to values, got " + Describe(node));
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) Fail(field, "names must be plain strings");
      if (kv.first.Scalar().empty()) Fail(field, "a variable has an empty name");
      const std::string key = EnvFieldName(kv.first.Scalar());
      marks_[key] = kv.second.Mark();
      if (s->env().count(kv.first.Scalar()) != 0) Fail(key, "appears twice");
      (*s->mutable_env())[kv.first.Scalar()] = ToString(kv.second, key);
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
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) Fail(field, "names must be plain strings");
      if (kv.first.Scalar().empty()) Fail(field, "a name is empty");
      const std::string key = MapKeyFieldName(field, kv.first.Scalar());
      marks_[key] = kv.second.Mark();
      if (out->count(kv.first.Scalar()) != 0) Fail(key, "appears twice");
      (*out)[kv.first.Scalar()] = ToString(kv.second, key);
    }
  }

  bool ToBool(const YAML::Node& node, const std::string& field) const {
    if (node.IsScalar() && !IsTextScalar(node)) {
      if (node.Scalar() == "true") return true;
      if (node.Scalar() == "false") return false;
    }
    Fail(field, "expected true or false, got " + Describe(node));
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
        });
  }

  std::map<std::string, YAML::Mark> marks_;
  size_t expanded_bytes_ = 0;
};

// 1-based line and column of byte `offset` of `text`.
std::string LineColumn(const std::string& text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column) + ":";
}

// JSON is read by the YAML parser, which is more lenient than JSON (comments, trailing
// commas, unquoted words): a spec that looks like JSON must first be strict JSON.
Status CheckStrictJson(const std::string& text, const std::string& source) {
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text);
    (void)parsed;
  } catch (const nlohmann::json::parse_error& e) {
    std::string why = e.what();
    const size_t at = why.find("syntax error");
    if (at != std::string::npos) why = why.substr(at);
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    return Status::InvalidArgument(source + ":" + LineColumn(text, offset) +
                                   " invalid JSON: " + why);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(source + ": invalid JSON: " + e.what());
  }
  return Status::Ok();
}

// Counts the documents of a YAML stream without building them. Not YAML::LoadAll: in
// yaml-cpp 0.7 it loops forever, allocating, on a ',' outside any flow collection
// (jbeder/yaml-cpp#1040): the parser reports an empty document without consuming the token,
// again and again. A document that starts where the previous one did is that token.
size_t CountDocuments(const std::string& text) {
  struct Starts : YAML::EventHandler {
    void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
    std::vector<YAML::Mark> marks;
  } starts;
  std::istringstream in(text);
  YAML::Parser parser(in);
  while (parser.HandleNextDocument(starts)) {
    const size_t n = starts.marks.size();
    if (n >= 2 && starts.marks[n - 1].pos == starts.marks[n - 2].pos) {
      const YAML::Mark& at = starts.marks[n - 1];
      const char c = at.pos >= 0 && static_cast<size_t>(at.pos) < text.size() ? text[at.pos] : ' ';
      throw YAML::ParserException(at, std::string("unexpected '") + c + "'");
    }
  }
  return starts.marks.size();
}

}  // namespace

StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& source) {
  if (text.size() > kMaxSpecBytes) {
    return Status::InvalidArgument(source + ": the spec is " + std::to_string(text.size()) +
                                   " bytes; at most " + std::to_string(kMaxSpecBytes) + " allowed");
  }
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    CONVOY_RETURN_IF_ERROR(CheckStrictJson(text, source));
  }
  SpecReader reader;
  v1::JobSpec spec;
  try {
    const size_t docs = CountDocuments(text);
    if (docs > 1) {
      return Status::InvalidArgument(source + ": expected one YAML document, got " +
                                     std::to_string(docs));
    }
    const YAML::Node root = docs == 0 ? YAML::Node() : YAML::Load(text);
    if (root.IsNull()) return Status::InvalidArgument(source + ": the spec is empty");
    spec = reader.Read(root);
  } catch (const SpecError& e) {
    const std::string where = Where(e.mark);
    // An unknown key is named as written: quote at most 128 bytes of it.
    const std::string field = e.field.size() <= 128 ? e.field : e.field.substr(0, 128) + "...";
    return Status::InvalidArgument(source + ":" + where + " " + field + ": " + e.message);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source + ":" + Where(e.mark) + " invalid YAML: " + e.msg);
  }
  if (spec.backend().empty()) spec.set_backend("gloo");
  Status st = ValidateJobSpec(spec);
  if (!st.ok()) {
    // Validation messages start with "<field>: ".
    const std::string field = st.message().substr(0, st.message().find(": "));
    return Status::InvalidArgument(source + ":" + Where(reader.MarkOf(field)) + " " + st.message());
  }
  return spec;
}

StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path) {
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
  return ParseJobSpec(text, path);
}

}  // namespace convoy

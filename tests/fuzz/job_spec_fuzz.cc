// libFuzzer target: the job-spec parser (spec/job_spec.h) and validation
// (spec/job_spec_validation.h). Besides "no crash, no sanitizer report" it checks:
//  - every error is INVALID_ARGUMENT and bounded in size; each of its lines (one error a
//    line) starts with the source name (or the --set to blame), has a reason, and names a
//    field (or says the text is not YAML/JSON);
//  - a spec that parses also validates, encodes as a proto that decodes to the same spec
//    (so every string is valid UTF-8), and round-trips: written back as JSON (a subset of
//    YAML) it parses to the same spec, and through OverrideJobSpec with no --set it comes
//    back the same;
//  - a valid spec's TrainerSpec, as the worker gives it to the built-in trainer
//    (spec/trainer_spec_env.h), is accepted by the trainer's own check and is the same.
// Input: spec text (YAML or JSON), as in corpus/job_spec/; each line "#set PATH=VALUE" (a YAML
// comment) is also given as a --set, at most 8 of them. An input whose first byte is NUL
// is instead a binary-encoded v1::JobSpec (as a SubmitJob RPC may carry, bypassing the
// parser) that goes to ValidateJobSpec directly; a spec it accepts must round-trip through
// the text form too.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"
#include "spec/job_spec.h"
#include "spec/job_spec_validation.h"
#include "spec/trainer_spec_env.h"

namespace {

using convoy::Status;
using convoy::StatusCode;
using convoy::v1::JobSpec;
using convoy::v1::TrainerSpec;

// Error messages may quote what the user wrote, but only so much of it: a coordinator
// answers with this text in gRPC trailers (8 KiB by default on the client). A path may be
// quoted whole (at most kMaxPathBytes); names, values and arguments only in part.
constexpr size_t kMaxMessageBytes = convoy::kMaxPathBytes + 512;

const char kSource[] = "fuzz.yaml";

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "PROPERTY VIOLATED: %s\n  %s\n", what, detail.substr(0, 2000).c_str());
  std::abort();
}

bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF))) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
    i += n + 1;
  }
  return true;
}

// The field names a message may start with: proto field names (and "hang_timeout", the
// spec's name for hang_timeout_s), "trainer.<field>", "<list>[i]", "env.<name>", "spec".
bool IsFieldPath(const std::string& path) {
  static const std::set<std::string> kTop = [] {
    std::set<std::string> names = {"spec",        "hang_timeout",   "max_runtime",
                                   "min_nodes",   "max_nodes",      "memory_per_proc",
                                   "preemptible", "resize_interval"};
    const auto* d = JobSpec::descriptor();
    for (int i = 0; i < d->field_count(); ++i) names.insert(d->field(i)->name());
    return names;
  }();
  static const std::set<std::string> kTrainer = [] {
    std::set<std::string> names;
    const auto* d = TrainerSpec::descriptor();
    for (int i = 0; i < d->field_count(); ++i) names.insert(d->field(i)->name());
    return names;
  }();
  if (path.rfind("env.", 0) == 0) return path.size() > 4;
  if (path.rfind("node_selector.", 0) == 0) return path.size() > 14;
  std::string p = path;
  if (!p.empty() && p.back() == ']') {  // "command[12]", "trainer.extra_args[0]"
    const size_t open = p.rfind('[');
    if (open == std::string::npos || open + 2 > p.size() - 1) return false;
    for (size_t i = open + 1; i + 1 < p.size(); ++i) {
      if (p[i] < '0' || p[i] > '9') return false;
    }
    p = p.substr(0, open);
    if (p != "command" && p != "trainer.extra_args") return false;
  }
  if (p.rfind("trainer.", 0) == 0) return kTrainer.count(p.substr(8)) != 0;
  return kTop.count(p) != 0;
}

std::vector<std::string> Lines(const std::string& m) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (;;) {
    const size_t end = m.find('\n', start);
    lines.push_back(m.substr(start, end == std::string::npos ? end : end - start));
    if (end == std::string::npos) return lines;
    start = end + 1;
  }
}

// "<field>: <reason>" with a known field.
void CheckValidationLine(const std::string& m) {
  const size_t colon = m.find(": ");
  if (colon == std::string::npos || colon == 0 || colon + 2 >= m.size()) {
    Fail("validation message is not '<field>: <reason>'", m);
  }
  if (!IsFieldPath(m.substr(0, colon))) Fail("validation message names no known field", m);
}

// One "<field>: <reason>" line per problem.
void CheckValidationMessage(const Status& st) {
  if (st.code() != StatusCode::kInvalidArgument) Fail("validation code", st.message());
  const std::string& m = st.message();
  if (m.size() > kMaxMessageBytes) Fail("validation message too long", m);
  for (const std::string& line : Lines(m)) {
    if (line.empty()) Fail("a validation message has an empty line", m);
    CheckValidationLine(line);
  }
}

// "<source>:[line:col:] <field>: <reason>", "<source>:[line:col:] invalid YAML|JSON: ...", or
// "--set <what was given>: <reason>".
void CheckParseLine(const std::string& m) {
  if (m.rfind("--set ", 0) == 0) {
    if (m.find(": ") == std::string::npos || m.size() > kMaxMessageBytes) {
      Fail("a --set's message is not '--set PATH=VALUE: <reason>'", m);
    }
    return;
  }
  const std::string prefix = std::string(kSource) + ":";
  if (m.rfind(prefix, 0) != 0) Fail("parse message does not start with the source", m);
  size_t at = prefix.size();
  // Optional "line:column:".
  size_t p = at;
  int numbers = 0;
  while (numbers < 2) {
    size_t q = p;
    while (q < m.size() && m[q] >= '0' && m[q] <= '9') ++q;
    if (q == p || q >= m.size() || m[q] != ':') break;
    p = q + 1;
    ++numbers;
  }
  if (numbers == 2) at = p;
  if (at >= m.size() || m[at] != ' ') Fail("parse message: no space after the location", m);
  const std::string rest = m.substr(at + 1);
  if (rest.empty()) Fail("parse message has no reason", m);
  for (const char* general :
       {"invalid YAML: ", "invalid JSON: ", "expected one YAML document", "the spec is "}) {
    if (rest.rfind(general, 0) == 0) return;
  }
  // Unknown and repeated keys are named as written (which may hold ": " or be cut short);
  // everything else by its field path.
  if (rest.find(": unknown field") != std::string::npos ||
      rest.find(": appears twice") != std::string::npos) {
    return;
  }
  const size_t colon = rest.find(": ");
  if (colon == std::string::npos || colon == 0 || colon + 2 >= rest.size()) {
    Fail("parse message is not '<field>: <reason>'", m);
  }
  if (!IsFieldPath(rest.substr(0, colon))) Fail("parse message names no known field", m);
}

void CheckParseMessage(const Status& st) {
  if (st.code() != StatusCode::kInvalidArgument) Fail("parse error code", st.message());
  const std::string& m = st.message();
  if (m.size() > kMaxMessageBytes + sizeof(kSource)) Fail("parse message too long", m);
  for (const std::string& line : Lines(m)) {
    if (line.empty()) Fail("a parse message has an empty line", m);
    CheckParseLine(line);
  }
}

// The spec as JSON text that ParseJobSpec must read back to the same spec.
std::string ToJsonText(const JobSpec& s) {
  nlohmann::ordered_json j;
  j["name"] = s.name();
  if (s.nodes() != 0) j["nodes"] = s.nodes();
  if (s.procs_per_node_gpu()) {
    j["procs_per_node"] = "gpu";
  } else {
    j["procs_per_node"] = s.procs_per_node();
  }
  if (!s.backend().empty()) j["backend"] = s.backend();
  if (s.has_trainer()) {
    const TrainerSpec& t = s.trainer();
    nlohmann::ordered_json tj = nlohmann::ordered_json::object();
    if (!t.model().empty()) tj["model"] = t.model();
    if (t.has_epochs()) tj["epochs"] = t.epochs();
    if (t.max_steps() != 0) tj["max_steps"] = t.max_steps();
    if (t.has_batch_size()) tj["batch_size"] = t.batch_size();
    if (t.has_lr()) tj["lr"] = t.lr();
    if (t.has_momentum()) tj["momentum"] = t.momentum();
    if (!t.optimizer().empty()) tj["optimizer"] = t.optimizer();
    if (!t.lr_schedule().empty()) tj["lr_schedule"] = t.lr_schedule();
    if (t.clip_grad_norm() != 0) tj["clip_grad_norm"] = t.clip_grad_norm();
    if (t.has_accumulate()) tj["accumulate"] = t.accumulate();
    if (t.has_bucket_mb()) tj["bucket_mb"] = t.bucket_mb();
    if (t.checkpoint_every() != 0) tj["checkpoint_every"] = t.checkpoint_every();
    if (!t.data_dir().empty()) tj["data_dir"] = t.data_dir();
    if (t.has_seed()) tj["seed"] = t.seed();
    if (!t.ddp().empty()) tj["ddp"] = t.ddp();
    if (!t.allreduce().empty()) tj["allreduce"] = t.allreduce();
    if (!t.amp().empty()) tj["amp"] = t.amp();
    if (t.has_snapshot_every()) tj["snapshot_every"] = t.snapshot_every();
    if (!t.compression().empty()) tj["compression"] = t.compression();
    if (t.has_powersgd_rank()) tj["powersgd_rank"] = t.powersgd_rank();
    if (t.powersgd_start_step() != 0) tj["powersgd_start_step"] = t.powersgd_start_step();
    if (t.has_max_bad_steps()) tj["max_bad_steps"] = t.max_bad_steps();
    if (t.extra_args_size() > 0) {
      tj["extra_args"] = nlohmann::ordered_json::array();
      for (const auto& a : t.extra_args()) tj["extra_args"].push_back(a);
    }
    j["trainer"] = tj;
  }
  if (s.command_size() > 0) {
    j["command"] = nlohmann::ordered_json::array();
    for (const auto& a : s.command()) j["command"].push_back(a);
  }
  if (!s.env().empty()) {
    j["env"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : s.env()) j["env"][k] = v;
  }
  if (s.max_restarts() != 0) j["max_restarts"] = s.max_restarts();
  if (!s.checkpoint_dir().empty()) j["checkpoint_dir"] = s.checkpoint_dir();
  if (s.hang_timeout_s() != 0) j["hang_timeout"] = s.hang_timeout_s();
  if (!s.working_dir().empty()) j["working_dir"] = s.working_dir();
  if (s.priority() != 0) j["priority"] = s.priority();
  if (s.max_runtime_s() != 0) j["max_runtime"] = s.max_runtime_s();
  if (s.has_preemptible()) j["preemptible"] = s.preemptible();
  if (s.min_nodes() != 0) j["min_nodes"] = s.min_nodes();
  if (s.max_nodes() != 0) j["max_nodes"] = s.max_nodes();
  if (s.gpus_per_proc() != 0) j["gpus_per_proc"] = s.gpus_per_proc();
  if (s.cpus_per_proc() != 0) j["cpus_per_proc"] = s.cpus_per_proc();
  if (s.memory_per_proc_bytes() != 0) j["memory_per_proc"] = s.memory_per_proc_bytes();
  if (!s.node_selector().empty()) {
    j["node_selector"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : s.node_selector()) j["node_selector"][k] = v;
  }
  if (s.resize_interval_s() != 0) j["resize_interval"] = s.resize_interval_s();
  if (!s.resume_from().empty()) j["resume_from"] = s.resume_from();
  return j.dump(2);
}

bool Same(const JobSpec& a, const JobSpec& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

// Properties of a spec that ValidateJobSpec accepted.
void CheckValidSpec(const JobSpec& spec) {
  for (const std::string* s :
       {&spec.name(), &spec.backend(), &spec.checkpoint_dir(), &spec.working_dir(),
        &spec.resume_from(), &spec.trainer().model(), &spec.trainer().data_dir()}) {
    if (!IsValidUtf8(*s)) Fail("a valid spec has a string that is not UTF-8", *s);
  }
  for (const auto& a : spec.command()) {
    if (!IsValidUtf8(a)) Fail("a valid spec has a command argument that is not UTF-8", a);
  }
  for (const auto& a : spec.trainer().extra_args()) {
    if (!IsValidUtf8(a)) Fail("a valid spec has an extra argument that is not UTF-8", a);
  }
  for (const auto& [k, v] : spec.env()) {
    if (!IsValidUtf8(v)) Fail("a valid spec has an env value that is not UTF-8", k + "=" + v);
  }
  // What the CLI sends, the coordinator must be able to decode.
  std::string wire;
  if (!spec.SerializeToString(&wire)) Fail("a valid spec does not encode", spec.DebugString());
  JobSpec decoded;
  if (!decoded.ParseFromString(wire) || !Same(decoded, spec)) {
    Fail("a valid spec does not decode to itself", spec.ShortDebugString());
  }
  const Status again = convoy::ValidateJobSpec(decoded);
  if (!again.ok()) Fail("validation is not stable across encoding", again.message());

  // What the worker gives the built-in trainer (CONVOY_TRAINER_SPEC), the trainer's own check
  // accepts, and it is the spec's TrainerSpec (less extra_args, which travel on argv).
  if (spec.has_trainer()) {
    const std::string sent = convoy::EncodeTrainerSpec(spec.trainer());
    auto got = convoy::DecodeTrainerSpec(sent);
    if (!got.ok()) Fail("the trainer refuses a valid spec's TrainerSpec", got.status().message());
    convoy::v1::TrainerSpec want = spec.trainer();
    want.clear_extra_args();
    if (!google::protobuf::util::MessageDifferencer::Equals(*got, want)) {
      Fail("the trainer is given another TrainerSpec",
           want.ShortDebugString() + "\n  became " + got->ShortDebugString() + "\n  via " + sent);
    }
  }

  // Written back as text, it reads back the same.
  const std::string text = ToJsonText(spec);
  auto reparsed = convoy::ParseJobSpec(text, kSource);
  if (!reparsed.ok()) {
    Fail("a valid spec written as JSON does not parse", reparsed.status().message() + "\n" + text);
  }
  JobSpec expected = spec;
  if (expected.procs_per_node_gpu()) expected.clear_procs_per_node();
  if (expected.backend().empty()) expected.set_backend("gloo");
  expected.clear_code_sha256();  // set by the CLI after --code, never a field of the text
  if (!Same(*reparsed, expected)) {
    Fail("a valid spec written as JSON parses to another spec",
         expected.ShortDebugString() + "\n  became " + reparsed->ShortDebugString());
  }
  // The tree OverrideJobSpec builds (for `convoy submit -- CMD --set ...`) holds every field.
  auto same = convoy::OverrideJobSpec(spec, {}, kSource);
  if (!same.ok()) Fail("a valid spec does not pass OverrideJobSpec", same.status().message());
  expected.set_code_sha256(spec.code_sha256());
  if (!Same(*same, expected)) {
    Fail("OverrideJobSpec without --set changes a valid spec",
         expected.ShortDebugString() + "\n  became " + same->ShortDebugString());
  }
}

// The "#set PATH=VALUE" lines of `text`, as --set arguments.
std::vector<std::string> Sets(const std::string& text) {
  std::vector<std::string> sets;
  for (const std::string& line : Lines(text)) {
    if (line.rfind("#set ", 0) == 0 && sets.size() < 8) sets.push_back(line.substr(5));
  }
  return sets;
}

void FuzzText(const std::string& text) {
  auto parsed = convoy::ParseJobSpec(text, kSource, Sets(text));
  if (!parsed.ok()) {
    CheckParseMessage(parsed.status());
    return;
  }
  const Status st = convoy::ValidateJobSpec(*parsed);
  if (!st.ok()) Fail("a parsed spec does not validate", st.message());
  CheckValidSpec(*parsed);
}

void FuzzProto(const uint8_t* data, size_t size) {
  JobSpec spec;
  if (!spec.ParseFromArray(data, static_cast<int>(size))) return;
  spec.DiscardUnknownFields();  // fields of a newer client: not part of the spec's text form
  const Status st = convoy::ValidateJobSpec(spec);
  if (!st.ok()) {
    CheckValidationMessage(st);
    return;
  }
  CheckValidSpec(spec);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > convoy::kMaxSpecBytes + 1) return -1;  // refused before parsing: not interesting
  if (size > 0 && data[0] == 0) {
    FuzzProto(data + 1, size - 1);
  } else {
    FuzzText(std::string(reinterpret_cast<const char*>(data), size));
  }
  return 0;
}

#include "spec/job_spec_validation.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <set>
#include <string>

#include "common/job_paths.h"
#include "common/util.h"
#include "spec/checkpoint_spec.h"
#include "spec/dependency_spec.h"
#include "spec/progress_spec.h"
#include "spec/sweep_spec.h"
#include "spec/trainer_limits.h"

#include "common/strings.h"

namespace convoy {
namespace {

// At most `max` bytes of what the user wrote, cut at a UTF-8 character boundary, for quoting in
// a message: a coordinator sends the message back in gRPC trailers, which are small (8 KiB).
std::string Shorten(const std::string& value, size_t max = 64) {
  if (value.size() <= max) return value;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(value[n]) & 0xC0) == 0x80) --n;
  return value.substr(0, n) + "...";
}

}  // namespace

std::string EnvFieldName(const std::string& key) { return MapKeyFieldName("env", key); }

std::string MapKeyFieldName(const std::string& map, const std::string& key) {
  std::string out = map + ".";
  for (char c : key.substr(0, 256)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '.' || c == '-') {
      out += c;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      out += hex;
    }
  }
  if (key.size() > 256) out += "...";
  return out;
}

bool IsValidLabelKey(const std::string& text) {
  if (text.empty() || text.size() > 253) return false;
  const char first = text[0];
  if (!((first >= 'A' && first <= 'Z') || (first >= 'a' && first <= 'z') ||
        (first >= '0' && first <= '9'))) {
    return false;
  }
  for (char c : text) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-' || c == '/')) {
      return false;
    }
  }
  return true;
}

bool IsValidLabelValue(const std::string& text) {
  if (text.size() > 63) return false;
  for (char c : text) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

int MinNodes(const v1::JobSpec& spec) { return IsElastic(spec) ? spec.min_nodes() : spec.nodes(); }
int MaxNodes(const v1::JobSpec& spec) { return IsElastic(spec) ? spec.max_nodes() : spec.nodes(); }

namespace {

// The problems found so far. Each check adds what it finds and returns whether the field was
// fine, so that a check that depends on another can be skipped.
class Problems {
 public:
  bool Add(const std::string& field, const std::string& why) {
    list_.push_back({field, why});
    return false;
  }
  std::vector<SpecProblem> Take() { return std::move(list_); }

 private:
  std::vector<SpecProblem> list_;
};

// An integer in [lo, hi].
template <typename T>
bool CheckRange(Problems& p, const std::string& field, T value, T lo, T hi) {
  if (value >= lo && value <= hi) return true;
  return p.Add(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                          ", got " + std::to_string(value));
}

bool CheckOneOf(Problems& p, const std::string& field, const std::string& value,
                const std::set<std::string>& allowed) {
  if (allowed.count(value) != 0) return true;
  std::string list;
  for (const auto& a : allowed) {
    if (a.empty()) continue;
    list += (list.empty() ? "" : ", ") + a;
  }
  return p.Add(field, "must be one of " + list + ", got '" + Shorten(value) + "'");
}

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF). Protobuf refuses to decode a string field that is not, so a spec holding such
// bytes (YAML passes them through) would fail at the coordinator instead of here.
bool IsUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
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
    if (s.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

bool CheckText(Problems& p, const std::string& field, const std::string& value, size_t max) {
  if (value.size() > max) {
    return p.Add(field, "is " + std::to_string(value.size()) + " bytes; at most " +
                            std::to_string(max) + " allowed");
  }
  if (value.find('\0') != std::string::npos) return p.Add(field, "contains a NUL byte");
  if (!IsUtf8(value)) return p.Add(field, "is not valid UTF-8");
  return true;
}

// Empty, or a path without ".." components: relative means relative to the job's own
// directory on each worker, which also checks where it resolves (common/job_paths.h).
bool CheckPath(Problems& p, const std::string& field, const std::string& path) {
  if (path.empty()) return true;
  if (!CheckText(p, field, path, kMaxPathBytes)) return false;
  if (HasDotDotComponent(path)) return p.Add(field, "'" + path + "' must not contain '..'");
  return true;
}

}  // namespace

bool IsJobIdLike(const std::string& s) {
  if (s.size() < 3 || s.compare(0, 2, "j-") != 0) return false;
  return s.find_first_not_of("0123456789", 2) == std::string::npos;
}

namespace {

// Each message states the range its check accepts (job_spec_test's RangeMessagesMatchTheRule).
// The ranges are the trainer's own (spec/trainer_limits.h).
void ValidateTrainer(Problems& p, const v1::TrainerSpec& t) {
  namespace lim = trainer_limits;
  if (!t.model().empty())
    CheckOneOf(p, "trainer.model", t.model(), {"fmnist-cnn", "mlp", "resnet"});
  // Fields with a default other than 0 are optional in the proto: absent takes the default,
  // and a written value, 0 included, must be valid.
  if (t.has_epochs()) {
    CheckRange<int64_t>(p, "trainer.epochs", t.epochs(), lim::kMinEpochs, lim::kMaxEpochs);
  }
  CheckRange<int64_t>(p, "trainer.max_steps", t.max_steps(), 0, lim::kMaxSteps);
  if (t.has_batch_size()) {
    CheckRange<int64_t>(p, "trainer.batch_size", t.batch_size(), 1, lim::kMaxBatchSize);
  }
  if (t.has_lr() && !(t.lr() > 0 && t.lr() <= lim::kMaxLr)) {
    p.Add("trainer.lr", "must be greater than 0 and at most " + ShortNumber(lim::kMaxLr) +
                            ", got " + ShortNumber(t.lr()) + " (omit it for the default, 0.01)");
  }
  if (t.has_momentum() && !(t.momentum() >= 0 && t.momentum() <= lim::kMaxMomentum)) {
    p.Add("trainer.momentum", "must be between 0 and " + ShortNumber(lim::kMaxMomentum) + ", got " +
                                  ShortNumber(t.momentum()));
  }
  CheckOneOf(p, "trainer.optimizer", t.optimizer(), {"", "sgd", "adam"});
  CheckOneOf(p, "trainer.lr_schedule", t.lr_schedule(), {"", "none", "step", "cosine"});
  if (!(t.clip_grad_norm() >= 0 && t.clip_grad_norm() <= lim::kMaxClipGradNorm)) {
    p.Add("trainer.clip_grad_norm", "must be between 0 and " + ShortNumber(lim::kMaxClipGradNorm) +
                                        " (0: no clipping), got " +
                                        ShortNumber(t.clip_grad_norm()));
  }
  CheckOneOf(p, "trainer.ddp", t.ddp(), {"", "hooks", "reducer"});
  CheckOneOf(p, "trainer.allreduce", t.allreduce(), {"", "auto", "shm", "gloo"});
  CheckOneOf(p, "trainer.amp", t.amp(), {"", "off", "bf16"});
  CheckOneOf(p, "trainer.compression", t.compression(),
             {"", "none", "bf16", "fp16", "powersgd", "auto"});
  if (t.ddp() == "reducer" && !t.compression().empty() && t.compression() != "none") {
    p.Add("trainer.compression",
          "'" + t.compression() + "' needs ddp: hooks (the Reducer path does not compress)");
  }
  if (t.has_powersgd_rank()) {
    CheckRange<int64_t>(p, "trainer.powersgd_rank", t.powersgd_rank(), 1, lim::kMaxPowerSgdRank);
  }
  CheckRange<int64_t>(p, "trainer.powersgd_start_step", t.powersgd_start_step(), 0, lim::kMaxSteps);
  if (t.has_max_bad_steps()) {
    CheckRange<int64_t>(p, "trainer.max_bad_steps", t.max_bad_steps(), 1, lim::kMaxBadSteps);
  }
  if (t.has_accumulate()) {
    CheckRange<int64_t>(p, "trainer.accumulate", t.accumulate(), 1, lim::kMaxAccumulate);
  }
  if (t.has_bucket_mb() &&
      !(t.bucket_mb() >= lim::kMinBucketMb && t.bucket_mb() <= lim::kMaxBucketMb)) {
    p.Add("trainer.bucket_mb", "must be between " + ShortNumber(lim::kMinBucketMb) + " and " +
                                   ShortNumber(lim::kMaxBucketMb) + ", got " +
                                   ShortNumber(t.bucket_mb()) + " (omit it for the default, 25)");
  }
  CheckRange<int64_t>(p, "trainer.checkpoint_every", t.checkpoint_every(), 0, lim::kMaxSteps);
  CheckRange<int64_t>(p, "trainer.snapshot_every", t.snapshot_every(), 0, lim::kMaxSteps);
  CheckPath(p, "trainer.data_dir", t.data_dir());
  CheckRange<int64_t>(p, "trainer.seed", t.seed(), 0, lim::kMaxSeed);
  if (t.extra_args_size() > kMaxArgs) {
    p.Add("trainer.extra_args", "too many arguments");
  } else {
    for (int i = 0; i < t.extra_args_size(); ++i) {
      CheckText(p, "trainer.extra_args[" + std::to_string(i) + "]", t.extra_args(i), kMaxArgBytes);
    }
  }
}

// nodes, or min_nodes and max_nodes, and resize_interval.
void ValidateNodes(Problems& p, const v1::JobSpec& spec, const SpecFieldWritten& written) {
  const bool has_nodes = spec.nodes() != 0 || written("nodes");
  const bool has_min = spec.min_nodes() != 0 || written("min_nodes");
  const bool has_max = spec.max_nodes() != 0 || written("max_nodes");
  if (!has_min && !has_max) {
    if (!has_nodes) {
      p.Add("nodes", "missing (a number of nodes, or min_nodes and max_nodes for an elastic job)");
    } else {
      CheckRange(p, "nodes", spec.nodes(), 1, kMaxNodes);
    }
    if (spec.resize_interval_s() != 0) {
      p.Add("resize_interval", "only an elastic job (min_nodes, max_nodes) resizes");
    }
    return;
  }
  if (has_nodes) {
    p.Add(has_max ? "max_nodes" : "min_nodes",
          "give either nodes or min_nodes and max_nodes (an elastic job), not both");
    return;
  }
  const bool min_ok = has_min ? CheckRange(p, "min_nodes", spec.min_nodes(), 1, kMaxNodes)
                              : p.Add("min_nodes", "missing (required with max_nodes)");
  const bool max_ok = has_max ? CheckRange(p, "max_nodes", spec.max_nodes(), 1, kMaxNodes)
                              : p.Add("max_nodes", "missing (required with min_nodes)");
  if (min_ok && max_ok && spec.max_nodes() < spec.min_nodes()) {
    p.Add("max_nodes", "must be at least min_nodes (" + std::to_string(spec.min_nodes()) +
                           "), got " + std::to_string(spec.max_nodes()));
  }
  CheckRange(p, "resize_interval", spec.resize_interval_s(), 0, kMaxResizeIntervalS);
}

void ValidateEnv(Problems& p, const v1::JobSpec& spec) {
  if (spec.env_size() > kMaxArgs) {
    p.Add("env", "too many variables");
    return;
  }
  for (const auto& [key, value] : spec.env()) {
    if (key.empty()) {
      p.Add("env", "a variable has an empty name");
      continue;
    }
    const std::string field = EnvFieldName(key);  // longer than 256: invalid
    bool ok = key.size() <= 256 && !(key[0] >= '0' && key[0] <= '9');
    for (char c : key) {
      ok = ok &&
           ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    }
    if (!ok) {
      p.Add(field, "is not a valid environment variable name");
    } else if (IsReservedEnvName(key)) {
      p.Add(field, "set by Convoy, cannot be overridden");
    } else {
      CheckText(p, field, value, kMaxArgBytes);
    }
  }
}

void ValidateNodeSelector(Problems& p, const v1::JobSpec& spec) {
  if (spec.node_selector_size() > 64) {
    p.Add("node_selector", "too many labels");
    return;
  }
  for (const auto& [key, value] : spec.node_selector()) {
    if (key.empty()) {
      p.Add("node_selector", "a label has an empty name");
      continue;
    }
    const std::string field = MapKeyFieldName("node_selector", key);
    if (!IsValidLabelKey(key)) {
      p.Add(field,
            "is not a valid label name (1-253 of [A-Za-z0-9._/-], starting with a letter or "
            "digit)");
    } else if (!IsValidLabelValue(value)) {
      p.Add(field,
            "'" + Shorten(value) + "' is not a valid label value (at most 63 of [A-Za-z0-9._-])");
    }
  }
}

}  // namespace

bool IsReservedEnvName(const std::string& name) {
  static const std::set<std::string> kReserved = {
      "RANK",        "LOCAL_RANK",       "WORLD_SIZE",      "LOCAL_WORLD_SIZE",
      "GROUP_RANK",  "ROLE_RANK",        "ROLE_WORLD_SIZE", "MASTER_ADDR",
      "MASTER_PORT", "GROUP_WORLD_SIZE", "ROLE_NAME"};
  return kReserved.count(name) != 0 || name.rfind("TORCHELASTIC_", 0) == 0 ||
         name.rfind("CONVOY_", 0) == 0;
}

std::vector<SpecProblem> FindTrainerSpecProblems(const v1::TrainerSpec& trainer) {
  Problems p;
  ValidateTrainer(p, trainer);
  return p.Take();
}

std::vector<SpecProblem> FindSpecProblems(const v1::JobSpec& spec,
                                          const SpecFieldWritten& written_or_null) {
  const SpecFieldWritten written =
      written_or_null ? written_or_null : [](const std::string&) { return false; };
  Problems p;
  if (spec.ByteSizeLong() > kMaxSpecBytes) {
    p.Add("spec", "is " + std::to_string(spec.ByteSizeLong()) + " bytes; at most " +
                      std::to_string(kMaxSpecBytes) + " allowed");
    return p.Take();
  }
  if (spec.name().empty() && !written("name")) {
    p.Add("name", "missing (a job name: 1-63 of [A-Za-z0-9._-])");
  } else if (!IsValidName(spec.name())) {
    p.Add("name", "'" + Shorten(spec.name()) +
                      "' is not valid: use 1-63 of [A-Za-z0-9._-], not starting with '.' or '-'");
  }
  ValidateNodes(p, spec, written);
  if (!spec.procs_per_node_gpu()) {
    if (spec.procs_per_node() == 0 && !written("procs_per_node")) {
      p.Add("procs_per_node", "missing (a number of processes per node, or \"gpu\")");
    } else if (CheckRange(p, "procs_per_node", spec.procs_per_node(), 1, kMaxProcsPerNode) &&
               int64_t{MaxNodes(spec)} * spec.procs_per_node() > kMaxWorldSize) {
      p.Add("procs_per_node",
            "nodes x procs_per_node exceeds " + std::to_string(kMaxWorldSize) + " ranks");
    }
  }
  if (!spec.backend().empty()) CheckOneOf(p, "backend", spec.backend(), {"gloo", "nccl", "auto"});
  if (spec.has_trainer() && spec.command_size() > 0) {
    p.Add("command", "give either trainer or command, not both");
  } else if (!spec.has_trainer() && spec.command_size() == 0) {
    p.Add("command", written("command")
                         ? "is empty (give a program and its arguments, as [python3, train.py])"
                         : "missing (a non-empty argv, or trainer for the built-in trainer)");
  }
  if (spec.has_trainer()) ValidateTrainer(p, spec.trainer());
  if (spec.command_size() > kMaxArgs) {
    p.Add("command", "too many arguments");
  } else {
    for (int i = 0; i < spec.command_size(); ++i) {
      const std::string field = "command[" + std::to_string(i) + "]";
      if (CheckText(p, field, spec.command(i), kMaxArgBytes) && i == 0 && spec.command(0).empty()) {
        p.Add(field, "the program must not be empty");
      }
    }
  }
  ValidateEnv(p, spec);
  CheckRange(p, "max_restarts", spec.max_restarts(), 0, kMaxRestarts);
  CheckPath(p, "checkpoint_dir", spec.checkpoint_dir());
  CheckRange(p, "hang_timeout", spec.hang_timeout_s(), 0, kMaxHangTimeoutS);
  CheckPath(p, "working_dir", spec.working_dir());
  if (!IsJobIdLike(spec.resume_from())) {
    CheckPath(p, "resume_from", spec.resume_from());
  } else if (spec.resume_from().size() > 22) {
    p.Add("resume_from", "'" + spec.resume_from().substr(0, 40) + "' is too long for a job id");
  }
  if (!spec.code_sha256().empty() &&
      (spec.code_sha256().size() != 64 ||
       spec.code_sha256().find_first_not_of("0123456789abcdef") != std::string::npos)) {
    p.Add("code_sha256", "must be 64 lower-case hexadecimal digits (a SHA-256)");
  }
  CheckRange(p, "priority", spec.priority(), -kMaxPriority, kMaxPriority);
  CheckRange<int64_t>(p, "max_runtime", spec.max_runtime_s(), 0, kMaxRuntimeS);
  CheckRange(p, "gpus_per_proc", spec.gpus_per_proc(), 0, kMaxGpusPerProc);
  CheckRange(p, "cpus_per_proc", spec.cpus_per_proc(), 0, kMaxCpusPerProc);
  CheckRange<int64_t>(p, "memory_per_proc", spec.memory_per_proc_bytes(), 0, kMaxMemoryPerProc);
  ValidateNodeSelector(p, spec);
  // When nodes are sick: stragglers and hangs (spec/progress_spec.h).
  for (const SpecProblem& problem : FindProgressSpecProblems(spec)) {
    p.Add(problem.field, problem.message);
  }
  // Checkpoints kept by policy (spec/checkpoint_spec.h).
  for (const SpecProblem& problem : FindCheckpointSpecProblems(spec)) {
    p.Add(problem.field, problem.message);
  }
  // Dependencies between jobs (spec/dependency_spec.h).
  for (const SpecProblem& problem : FindDependencySpecProblems(spec)) {
    p.Add(problem.field, problem.message);
  }
  // Sweeps (spec/sweep_spec.h).
  for (const SpecProblem& problem : FindSweepProblems(spec)) p.Add(problem.field, problem.message);
  return p.Take();
}

Status ValidateJobSpec(const v1::JobSpec& spec) {
  return SpecProblemsStatus(FindSpecProblems(spec), "");
}

Status SpecProblemsStatus(const std::vector<SpecProblem>& problems, const std::string& prefix) {
  if (problems.empty()) return Status::Ok();
  std::vector<std::string> lines;
  lines.reserve(problems.size());
  for (const SpecProblem& problem : problems) {
    lines.push_back(prefix + problem.field + ": " + problem.message);
  }
  return Status::InvalidArgument(JoinSpecProblemLines(lines, prefix));
}

namespace {

// `line` with control bytes (a newline in a quoted value or key included) written as \xNN,
// so that it stays one line, and at most kMaxSpecMessageBytes long.
std::string OneLine(const std::string& line) {
  std::string out;
  for (char c : line) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  return out.size() <= kMaxSpecMessageBytes ? out : Shorten(out, kMaxSpecMessageBytes);
}

}  // namespace

std::string JoinSpecProblemLines(const std::vector<std::string>& lines, const std::string& prefix) {
  std::string out;
  size_t shown = 0;
  for (const std::string& raw : lines) {
    const std::string line = OneLine(raw);
    if (shown > 0 && out.size() + 1 + line.size() > kMaxSpecMessageBytes) break;
    out += (shown > 0 ? "\n" : "") + line;
    ++shown;
  }
  if (shown < lines.size()) {
    out += "\n" + prefix + "spec: " + std::to_string(lines.size() - shown) +
           " more problems not shown";
  }
  return out;
}

}  // namespace convoy

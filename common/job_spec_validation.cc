#include "common/job_spec_validation.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <set>
#include <string>

#include "common/job_paths.h"
#include "common/util.h"

namespace convoy {
namespace {

Status Invalid(const std::string& field, const std::string& why) {
  return Status::InvalidArgument(field + ": " + why);
}

template <typename T>
Status CheckRange(const std::string& field, T value, T lo, T hi) {
  if (value < lo || value > hi) {
    return Invalid(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                              ", got " + std::to_string(value));
  }
  return Status::Ok();
}

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

Status CheckOneOf(const std::string& field, const std::string& value,
                  const std::set<std::string>& allowed) {
  if (allowed.count(value) != 0) return Status::Ok();
  std::string list;
  for (const auto& a : allowed) {
    if (a.empty()) continue;
    list += (list.empty() ? "" : ", ") + a;
  }
  return Invalid(field, "must be one of " + list + ", got '" + Shorten(value) + "'");
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

Status CheckText(const std::string& field, const std::string& value, size_t max) {
  if (value.size() > max) {
    return Invalid(field, "is " + std::to_string(value.size()) + " bytes; at most " +
                              std::to_string(max) + " allowed");
  }
  if (value.find('\0') != std::string::npos) return Invalid(field, "contains a NUL byte");
  if (!IsUtf8(value)) return Invalid(field, "is not valid UTF-8");
  return Status::Ok();
}

// Empty, or a path without ".." components: relative means relative to the job's own
// directory on each worker, which also checks where it resolves (common/job_paths.h).
Status CheckPath(const std::string& field, const std::string& path) {
  if (path.empty()) return Status::Ok();
  CONVOY_RETURN_IF_ERROR(CheckText(field, path, kMaxPathBytes));
  if (HasDotDotComponent(path)) return Invalid(field, "'" + path + "' must not contain '..'");
  return Status::Ok();
}

// A finite number >= 0 (and <= max when given).
Status CheckNonNegative(const std::string& field, double value,
                        double max = std::numeric_limits<double>::max()) {
  if (!std::isfinite(value) || value < 0) {
    return Invalid(field, "must be a finite number >= 0, got " + std::to_string(value));
  }
  if (value > max) {
    return Invalid(field, "must be at most " + std::to_string(static_cast<int64_t>(max)) +
                              ", got " + std::to_string(value));
  }
  return Status::Ok();
}

Status ValidateTrainer(const v1::TrainerSpec& t) {
  if (!t.model().empty()) {
    CONVOY_RETURN_IF_ERROR(CheckOneOf("trainer.model", t.model(), {"fmnist-cnn", "mlp", "resnet"}));
  }
  // Fields with a default other than 0 are optional in the proto: absent takes the default,
  // and a written value, 0 included, must be valid.
  if (t.has_epochs()) {
    CONVOY_RETURN_IF_ERROR(CheckRange("trainer.epochs", t.epochs(), 1, 10000));
  }
  CONVOY_RETURN_IF_ERROR(
      CheckRange<int64_t>("trainer.max_steps", t.max_steps(), 0, int64_t{1} << 40));
  if (t.has_batch_size()) {
    CONVOY_RETURN_IF_ERROR(CheckRange("trainer.batch_size", t.batch_size(), 1, 65536));
  }
  if (t.has_lr()) {
    CONVOY_RETURN_IF_ERROR(CheckNonNegative("trainer.lr", t.lr(), 1e3));
    if (t.lr() == 0) return Invalid("trainer.lr", "must be greater than 0 (omit it for 0.01)");
  }
  if (t.has_momentum() && !(t.momentum() >= 0 && t.momentum() < 1)) {
    return Invalid("trainer.momentum", "must be in [0, 1), got " + std::to_string(t.momentum()));
  }
  CONVOY_RETURN_IF_ERROR(CheckOneOf("trainer.optimizer", t.optimizer(), {"", "sgd", "adam"}));
  CONVOY_RETURN_IF_ERROR(
      CheckOneOf("trainer.lr_schedule", t.lr_schedule(), {"", "none", "step", "cosine"}));
  CONVOY_RETURN_IF_ERROR(CheckNonNegative("trainer.clip_grad_norm", t.clip_grad_norm()));
  CONVOY_RETURN_IF_ERROR(CheckOneOf("trainer.ddp", t.ddp(), {"", "hooks", "reducer"}));
  CONVOY_RETURN_IF_ERROR(
      CheckOneOf("trainer.allreduce", t.allreduce(), {"", "auto", "shm", "gloo"}));
  CONVOY_RETURN_IF_ERROR(CheckOneOf("trainer.amp", t.amp(), {"", "off", "bf16"}));
  if (t.has_accumulate()) {
    CONVOY_RETURN_IF_ERROR(CheckRange("trainer.accumulate", t.accumulate(), 1, 1024));
  }
  if (t.has_bucket_mb()) {
    CONVOY_RETURN_IF_ERROR(CheckNonNegative("trainer.bucket_mb", t.bucket_mb(), 1024));
    if (t.bucket_mb() < 0.001) {
      return Invalid("trainer.bucket_mb", "must be at least 0.001 (omit it for the default, 25)");
    }
  }
  CONVOY_RETURN_IF_ERROR(
      CheckRange<int64_t>("trainer.checkpoint_every", t.checkpoint_every(), 0, int64_t{1} << 40));
  CONVOY_RETURN_IF_ERROR(
      CheckRange<int64_t>("trainer.snapshot_every", t.snapshot_every(), 0, int64_t{1} << 40));
  CONVOY_RETURN_IF_ERROR(CheckPath("trainer.data_dir", t.data_dir()));
  if (t.seed() < 0) {
    return Invalid("trainer.seed", "must not be negative, got " + std::to_string(t.seed()));
  }
  if (t.extra_args_size() > kMaxArgs) return Invalid("trainer.extra_args", "too many arguments");
  for (int i = 0; i < t.extra_args_size(); ++i) {
    CONVOY_RETURN_IF_ERROR(
        CheckText("trainer.extra_args[" + std::to_string(i) + "]", t.extra_args(i), kMaxArgBytes));
  }
  return Status::Ok();
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

Status ValidateJobSpec(const v1::JobSpec& spec) {
  if (spec.ByteSizeLong() > kMaxSpecBytes) {
    return Invalid("spec", "is " + std::to_string(spec.ByteSizeLong()) + " bytes; at most " +
                               std::to_string(kMaxSpecBytes) + " allowed");
  }
  if (spec.name().empty()) return Invalid("name", "is required");
  if (!IsValidName(spec.name())) {
    return Invalid("name", "'" + Shorten(spec.name()) +
                               "' is not valid: use 1-63 of [A-Za-z0-9._-], not starting "
                               "with '.' or '-'");
  }
  if (spec.min_nodes() != 0 || spec.max_nodes() != 0) {
    if (spec.nodes() != 0) {
      return Invalid(spec.max_nodes() != 0 ? "max_nodes" : "min_nodes",
                     "give either nodes or min_nodes and max_nodes (an elastic job), not both");
    }
    if (spec.min_nodes() == 0) return Invalid("min_nodes", "is required with max_nodes");
    if (spec.max_nodes() == 0) return Invalid("max_nodes", "is required with min_nodes");
    CONVOY_RETURN_IF_ERROR(CheckRange("min_nodes", spec.min_nodes(), 1, kMaxNodes));
    CONVOY_RETURN_IF_ERROR(CheckRange("max_nodes", spec.max_nodes(), 1, kMaxNodes));
    if (spec.max_nodes() < spec.min_nodes()) {
      return Invalid("max_nodes", "must be at least min_nodes (" +
                                      std::to_string(spec.min_nodes()) + "), got " +
                                      std::to_string(spec.max_nodes()));
    }
  } else {
    CONVOY_RETURN_IF_ERROR(CheckRange("nodes", spec.nodes(), 1, kMaxNodes));
    if (spec.resize_interval_s() != 0) {
      return Invalid("resize_interval", "only an elastic job (min_nodes, max_nodes) resizes");
    }
  }
  CONVOY_RETURN_IF_ERROR(
      CheckRange("resize_interval", spec.resize_interval_s(), 0, kMaxResizeIntervalS));
  if (!spec.procs_per_node_gpu()) {
    CONVOY_RETURN_IF_ERROR(
        CheckRange("procs_per_node", spec.procs_per_node(), 1, kMaxProcsPerNode));
    if (int64_t{MaxNodes(spec)} * spec.procs_per_node() > kMaxWorldSize) {
      return Invalid("procs_per_node",
                     "nodes x procs_per_node exceeds " + std::to_string(kMaxWorldSize) + " ranks");
    }
  }
  if (!spec.backend().empty()) {
    CONVOY_RETURN_IF_ERROR(CheckOneOf("backend", spec.backend(), {"gloo", "nccl", "auto"}));
  }
  if (spec.has_trainer() && spec.command_size() > 0) {
    return Invalid("command", "give either trainer or command, not both");
  }
  if (!spec.has_trainer() && spec.command_size() == 0) {
    return Invalid("command",
                   "give either trainer (the built-in trainer) or command (a non-empty argv)");
  }
  if (spec.has_trainer()) CONVOY_RETURN_IF_ERROR(ValidateTrainer(spec.trainer()));
  if (spec.command_size() > kMaxArgs) return Invalid("command", "too many arguments");
  for (int i = 0; i < spec.command_size(); ++i) {
    const std::string field = "command[" + std::to_string(i) + "]";
    CONVOY_RETURN_IF_ERROR(CheckText(field, spec.command(i), kMaxArgBytes));
    if (i == 0 && spec.command(0).empty()) return Invalid(field, "the program must not be empty");
  }
  if (spec.env_size() > kMaxArgs) return Invalid("env", "too many variables");
  for (const auto& [key, value] : spec.env()) {
    if (key.empty()) return Invalid("env", "a variable has an empty name");
    const std::string field = EnvFieldName(key);  // longer than 256: invalid
    bool ok = !key.empty() && key.size() <= 256 && !(key[0] >= '0' && key[0] <= '9');
    for (char c : key) {
      ok = ok &&
           ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    }
    if (!ok) return Invalid(field, "is not a valid environment variable name");
    if (IsReservedEnvName(key)) return Invalid(field, "set by Convoy, cannot be overridden");
    CONVOY_RETURN_IF_ERROR(CheckText(field, value, kMaxArgBytes));
  }
  CONVOY_RETURN_IF_ERROR(CheckRange("max_restarts", spec.max_restarts(), 0, kMaxRestarts));
  CONVOY_RETURN_IF_ERROR(CheckPath("checkpoint_dir", spec.checkpoint_dir()));
  CONVOY_RETURN_IF_ERROR(CheckRange("hang_timeout", spec.hang_timeout_s(), 0, kMaxHangTimeoutS));
  CONVOY_RETURN_IF_ERROR(CheckPath("working_dir", spec.working_dir()));
  if (!spec.code_sha256().empty() &&
      (spec.code_sha256().size() != 64 ||
       spec.code_sha256().find_first_not_of("0123456789abcdef") != std::string::npos)) {
    return Invalid("code_sha256", "must be 64 lower-case hexadecimal digits (a SHA-256)");
  }
  CONVOY_RETURN_IF_ERROR(CheckRange("priority", spec.priority(), -kMaxPriority, kMaxPriority));
  CONVOY_RETURN_IF_ERROR(CheckRange<int64_t>("max_runtime", spec.max_runtime_s(), 0, kMaxRuntimeS));
  CONVOY_RETURN_IF_ERROR(CheckRange("gpus_per_proc", spec.gpus_per_proc(), 0, kMaxGpusPerProc));
  CONVOY_RETURN_IF_ERROR(CheckRange("cpus_per_proc", spec.cpus_per_proc(), 0, kMaxCpusPerProc));
  CONVOY_RETURN_IF_ERROR(
      CheckRange<int64_t>("memory_per_proc", spec.memory_per_proc_bytes(), 0, kMaxMemoryPerProc));
  if (spec.node_selector_size() > 64) return Invalid("node_selector", "too many labels");
  for (const auto& [key, value] : spec.node_selector()) {
    if (key.empty()) return Invalid("node_selector", "a label has an empty name");
    const std::string field = MapKeyFieldName("node_selector", key);
    if (!IsValidLabelKey(key)) {
      return Invalid(field,
                     "is not a valid label name (1-253 of [A-Za-z0-9._/-], starting with a "
                     "letter or digit)");
    }
    if (!IsValidLabelValue(value)) {
      return Invalid(field, "'" + Shorten(value) +
                                "' is not a valid label value (at most 63 of [A-Za-z0-9._-])");
    }
  }
  return Status::Ok();
}

}  // namespace convoy

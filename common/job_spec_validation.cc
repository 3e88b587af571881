#include "common/job_spec_validation.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

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

Status CheckOneOf(const std::string& field, const std::string& value,
                  const std::set<std::string>& allowed) {
  if (allowed.count(value) != 0) return Status::Ok();
  std::string list;
  for (const auto& a : allowed) {
    if (a.empty()) continue;
    list += (list.empty() ? "" : ", ") + a;
  }
  return Invalid(field, "must be one of " + list + ", got '" + value + "'");
}

Status CheckText(const std::string& field, const std::string& value, size_t max) {
  if (value.size() > max) {
    return Invalid(field, "is " + std::to_string(value.size()) + " bytes; at most " +
                              std::to_string(max) + " allowed");
  }
  if (value.find('\0') != std::string::npos) return Invalid(field, "contains a NUL byte");
  return Status::Ok();
}

// Empty, or an absolute path without ".." components.
Status CheckPath(const std::string& field, const std::string& path) {
  if (path.empty()) return Status::Ok();
  CONVOY_RETURN_IF_ERROR(CheckText(field, path, kMaxPathBytes));
  if (path[0] != '/') return Invalid(field, "must be an absolute path, got '" + path + "'");
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0) {
      return Invalid(field, "must not contain '..' components, got '" + path + "'");
    }
    start = end + 1;
  }
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
  CONVOY_RETURN_IF_ERROR(CheckRange("trainer.epochs", t.epochs(), 0, 10000));
  CONVOY_RETURN_IF_ERROR(
      CheckRange<int64_t>("trainer.max_steps", t.max_steps(), 0, int64_t{1} << 40));
  CONVOY_RETURN_IF_ERROR(CheckRange("trainer.batch_size", t.batch_size(), 0, 65536));
  CONVOY_RETURN_IF_ERROR(CheckNonNegative("trainer.lr", t.lr()));
  if (!(t.momentum() >= 0 && t.momentum() < 1)) {
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
  CONVOY_RETURN_IF_ERROR(CheckRange("trainer.accumulate", t.accumulate(), 0, 1024));
  CONVOY_RETURN_IF_ERROR(CheckNonNegative("trainer.bucket_mb", t.bucket_mb(), 1024));
  CONVOY_RETURN_IF_ERROR(
      CheckRange<int64_t>("trainer.checkpoint_every", t.checkpoint_every(), 0, int64_t{1} << 40));
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
    return Invalid("name", "'" + spec.name() +
                               "' is not valid: use 1-63 of [A-Za-z0-9._-], not starting "
                               "with '.' or '-'");
  }
  CONVOY_RETURN_IF_ERROR(CheckRange("nodes", spec.nodes(), 1, kMaxNodes));
  if (!spec.procs_per_node_gpu()) {
    CONVOY_RETURN_IF_ERROR(
        CheckRange("procs_per_node", spec.procs_per_node(), 1, kMaxProcsPerNode));
    if (int64_t{spec.nodes()} * spec.procs_per_node() > kMaxWorldSize) {
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
    const std::string field = "env." + key;
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
  return Status::Ok();
}

}  // namespace convoy

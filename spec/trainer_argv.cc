#include "spec/trainer_argv.h"

#include <charconv>

namespace convoy {
namespace {

// The shortest text that reads back as the same double ("0.1", not "0.10000000000000001").
std::string FormatDouble(double v) {
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, result.ptr);
}

}  // namespace

std::vector<std::string> BuildArgv(const v1::JobSpec& spec, const std::string& trainer_path) {
  if (!spec.has_trainer()) {
    return {spec.command().begin(), spec.command().end()};
  }
  const v1::TrainerSpec& t = spec.trainer();
  std::vector<std::string> argv{trainer_path};
  auto add = [&argv](const char* flag, const std::string& value) {
    argv.emplace_back(flag);
    argv.push_back(value);
  };
  if (!t.model().empty()) add("--model", t.model());
  if (t.has_epochs()) add("--epochs", std::to_string(t.epochs()));
  if (t.max_steps() > 0) add("--max-steps", std::to_string(t.max_steps()));
  if (t.has_batch_size()) add("--batch-size", std::to_string(t.batch_size()));
  if (t.has_lr()) add("--lr", FormatDouble(t.lr()));
  if (t.has_momentum()) add("--momentum", FormatDouble(t.momentum()));
  if (!t.optimizer().empty()) add("--optimizer", t.optimizer());
  if (!t.lr_schedule().empty()) add("--lr-schedule", t.lr_schedule());
  if (t.clip_grad_norm() > 0) add("--clip-grad-norm", FormatDouble(t.clip_grad_norm()));
  if (t.has_accumulate()) add("--accumulate", std::to_string(t.accumulate()));
  if (t.has_bucket_mb()) add("--bucket-mb", FormatDouble(t.bucket_mb()));
  if (t.checkpoint_every() > 0) add("--checkpoint-every", std::to_string(t.checkpoint_every()));
  if (t.has_snapshot_every()) add("--snapshot-every", std::to_string(t.snapshot_every()));
  if (!t.data_dir().empty()) add("--data-dir", t.data_dir());
  if (t.has_seed()) add("--seed", std::to_string(t.seed()));
  if (!t.ddp().empty()) add("--ddp", t.ddp());
  if (!t.allreduce().empty()) add("--allreduce", t.allreduce());
  if (!t.amp().empty()) add("--amp", t.amp());
  if (!t.compression().empty()) add("--compression", t.compression());
  if (t.has_powersgd_rank()) add("--powersgd-rank", std::to_string(t.powersgd_rank()));
  if (t.powersgd_start_step() > 0) {
    add("--powersgd-start-step", std::to_string(t.powersgd_start_step()));
  }
  add("--backend", spec.backend().empty() ? "gloo" : spec.backend());
  argv.insert(argv.end(), t.extra_args().begin(), t.extra_args().end());
  return argv;
}

}  // namespace convoy

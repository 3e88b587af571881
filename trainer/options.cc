#include "trainer/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

#include "spec/trainer_limits.h"
#include "trainer/bad_steps.h"

namespace convoy::trainer {
namespace {

bool ToInt(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool ToDouble(const std::string& s, double lo, double hi, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

template <typename T>
FlagSetter IntFlag(T* field, int64_t lo, int64_t hi) {
  return [field, lo, hi](const std::string& v) -> std::string {
    int64_t x;
    if (!ToInt(v, lo, hi, &x)) {
      return "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
             "], got '" + v + "'";
    }
    *field = static_cast<T>(x);
    return "";
  };
}

FlagSetter RealFlag(double* field, double lo, double hi) {
  return [field, lo, hi](const std::string& v) -> std::string {
    if (!ToDouble(v, lo, hi, field)) return "expected a number, got '" + v + "'";
    return "";
  };
}

FlagSetter Choice(std::string* field, std::initializer_list<const char*> allowed) {
  std::vector<std::string> a(allowed.begin(), allowed.end());
  return [field, a](const std::string& v) -> std::string {
    for (const auto& x : a) {
      if (x == v) {
        *field = v;
        return "";
      }
    }
    std::string list;
    for (const auto& x : a) list += (list.empty() ? "" : ", ") + x;
    return "expected one of " + list + ", got '" + v + "'";
  };
}

FlagSetter Text(std::string* field) {
  return [field](const std::string& v) -> std::string {
    *field = v;
    return "";
  };
}

}  // namespace

std::map<std::string, FlagSetter> OptionFlags(Options* o) {
  namespace lim = trainer_limits;
  return {
      {"--model", Choice(&o->model, {"fmnist-cnn", "mlp", "resnet"})},
      {"--epochs", IntFlag(&o->epochs, lim::kMinEpochs, lim::kMaxEpochs)},
      {"--max-steps", IntFlag(&o->max_steps, 0, lim::kMaxSteps)},
      {"--batch-size", IntFlag(&o->batch_size, 1, lim::kMaxBatchSize)},
      {"--lr", RealFlag(&o->lr, 0, lim::kMaxLr)},
      {"--momentum", RealFlag(&o->momentum, 0, lim::kMaxMomentum)},
      {"--optimizer", Choice(&o->optimizer, {"sgd", "adam"})},
      {"--lr-schedule", Choice(&o->lr_schedule, {"none", "step", "cosine"})},
      {"--clip-grad-norm", RealFlag(&o->clip_grad_norm, 0, lim::kMaxClipGradNorm)},
      {"--accumulate", IntFlag(&o->accumulate, 1, lim::kMaxAccumulate)},
      {"--bucket-mb", RealFlag(&o->bucket_mb, lim::kMinBucketMb, lim::kMaxBucketMb)},
      {"--checkpoint-every", IntFlag(&o->checkpoint_every, 0, lim::kMaxSteps)},
      {"--checkpoint-dir", Text(&o->checkpoint_dir)},
      {"--snapshot-every", IntFlag(&o->snapshot_every, 0, lim::kMaxSteps)},
      {"--snapshot-dir", Text(&o->snapshot_dir)},
      {"--resume-from", Text(&o->resume_from)},
      {"--max-world-size", IntFlag(&o->max_world_size, 1, 1 << 20)},
      {"--data-dir", Text(&o->data_dir)},
      {"--data-cache", Text(&o->data_cache)},
      {"--seed", IntFlag(&o->seed, 0, lim::kMaxSeed)},
      {"--backend", Choice(&o->backend, {"gloo", "nccl", "auto"})},
      {"--allreduce", Choice(&o->allreduce, {"auto", "shm", "gloo"})},
      {"--ddp", Choice(&o->ddp, {"hooks", "reducer"})},
      {"--amp", Choice(&o->amp, {"off", "bf16"})},
      {"--compression", Choice(&o->compression, {"none", "bf16", "fp16", "powersgd", "auto"})},
      {"--powersgd-rank", IntFlag(&o->powersgd_rank, 1, lim::kMaxPowerSgdRank)},
      {"--powersgd-start-step", IntFlag(&o->powersgd_start_step, 0, lim::kMaxSteps)},
      {"--max-bad-steps", IntFlag(&o->max_bad_steps, 1, lim::kMaxBadSteps)},
      {"--bench-step-checks", IntFlag(&o->bench_step_checks, 0, lim::kMaxSteps)},
      {"--threads", IntFlag(&o->threads, 1, 1024)},
      {"--log-every", IntFlag(&o->log_every, 1, 1 << 30)},
      {"--pg-timeout-s", IntFlag(&o->pg_timeout_s, 1, 86400)},
      {"--save-params", Text(&o->save_params)},
      {"--train-limit", IntFlag(&o->train_limit, 0, int64_t{1} << 40)},
  };
}

namespace {

// argv: every flag of OptionFlags (--flag VALUE or --flag=VALUE), --no-eval and
// --fill-data-cache.
std::string ParseArgv(int argc, char** argv, const std::map<std::string, FlagSetter>& flags,
                      Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--no-eval") {
      o->eval = false;
      continue;
    }
    if (flag == "--fill-data-cache") {
      o->fill_data_cache = true;
      continue;
    }
    std::string value;
    const auto eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return flag + ": needs a value";
    }
    auto it = flags.find(flag);
    if (it == flags.end()) return flag + ": unknown flag";
    std::string err = it->second(value);
    if (!err.empty()) return flag + ": " + err;
  }
  return "";
}

// The torchrun environment and Convoy's variables.
std::string ReadEnvironment(Options* o) {
  auto env_int = [](const char* name, int lo, int hi, int* field) -> std::string {
    const char* v = std::getenv(name);
    if (v == nullptr) return "";
    int64_t x;
    if (!ToInt(v, lo, hi, &x)) return std::string(name) + ": invalid value '" + v + "'";
    *field = static_cast<int>(x);
    return "";
  };
  for (auto [name, field, hi] : {std::make_tuple("RANK", &o->rank, 1 << 20),
                                 std::make_tuple("WORLD_SIZE", &o->world_size, 1 << 20),
                                 std::make_tuple("LOCAL_RANK", &o->local_rank, 1 << 20),
                                 std::make_tuple("LOCAL_WORLD_SIZE", &o->local_world_size, 1 << 20),
                                 std::make_tuple("GROUP_RANK", &o->group_rank, 1 << 20),
                                 std::make_tuple("GROUP_WORLD_SIZE", &o->group_world_size, 1 << 20),
                                 std::make_tuple("MASTER_PORT", &o->master_port, 65535),
                                 std::make_tuple("CONVOY_ATTEMPT", &o->attempt, 1 << 20)}) {
    std::string err = env_int(name, 0, hi, field);
    if (!err.empty()) return err;
  }
  if (o->world_size < 1) return "WORLD_SIZE: must be at least 1";
  if (o->rank >= o->world_size) return "RANK: must be below WORLD_SIZE";
  if (o->local_world_size < 1) o->local_world_size = 1;
  if (o->group_world_size < 1) o->group_world_size = 1;
  if (o->group_rank >= o->group_world_size) return "GROUP_RANK: must be below GROUP_WORLD_SIZE";
  if (const char* v = std::getenv("MASTER_ADDR")) o->master_addr = v;
  if (const char* v = std::getenv("CONVOY_METRICS_SOCKET")) o->metrics_socket = v;
  if (o->checkpoint_dir.empty()) {
    if (const char* v = std::getenv("CONVOY_CHECKPOINT_DIR")) o->checkpoint_dir = v;
  }
  if (const char* v = std::getenv(rank_contract::kCheckpointPolicyEnv)) {
    o->checkpoints_kept_by_worker = std::string(v) == "1";
  }
  if (o->data_cache.empty()) {
    if (const char* v = std::getenv("CONVOY_CACHE_DIR")) o->data_cache = v;
  }
  if (o->snapshot_dir.empty()) {
    if (const char* v = std::getenv("CONVOY_SNAPSHOT_DIR")) o->snapshot_dir = v;
  }
  if (const char* v = std::getenv("CONVOY_PREEMPT_FILE")) o->preempt_file = v;
  if (const char* v = std::getenv("CONVOY_JOB_ID")) o->job_id = v;
  if (const char* v = std::getenv("CONVOY_JOB_UID")) o->job_uid = v;
  if (const char* v = std::getenv("CONVOY_CLUSTER_ID")) o->cluster_id = v;
  if (o->resume_from.empty()) {
    if (const char* v = std::getenv("CONVOY_RESUME_FROM")) o->resume_from = v;
  }
  if (const char* v = std::getenv("CONVOY_RESUME_FROM_UID")) o->resume_from_uid = v;
  if (const char* v = std::getenv(kTestNanLossStepsEnv)) {
    std::string err = ParseStepList(v, &o->test_nan_loss_steps);
    if (!err.empty()) return std::string(kTestNanLossStepsEnv) + ": " + err;
  }
  if (o->max_world_size == 0) {
    std::string err = env_int("CONVOY_MAX_WORLD_SIZE", 1, 1 << 20, &o->max_world_size);
    if (!err.empty()) return err;
    if (o->max_world_size != 0 && o->max_world_size < o->world_size) {
      return "CONVOY_MAX_WORLD_SIZE: " + std::to_string(o->max_world_size) +
             " is below WORLD_SIZE " + std::to_string(o->world_size);
    }
  } else if (o->max_world_size < o->world_size) {
    return "--max-world-size: " + std::to_string(o->max_world_size) + " is below WORLD_SIZE " +
           std::to_string(o->world_size);
  }
  if (o->max_world_size == 0) o->max_world_size = o->world_size;
  return "";
}

}  // namespace

std::string ParseOptions(int argc, char** argv, Options* o) {
  if (std::string err = ReadTrainerSpecEnvironment(o); !err.empty()) return err;
  if (std::string err = ParseArgv(argc, argv, OptionFlags(o), o); !err.empty()) return err;
  if (o->compression != "none" && o->ddp == "reducer") {
    return "--compression: '" + o->compression +
           "' needs --ddp hooks (the Reducer path does not compress)";
  }
  return ReadEnvironment(o);
}

}  // namespace convoy::trainer

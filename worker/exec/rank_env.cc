#include "worker/exec/rank_env.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "common/rank_contract.h"
#include "spec/checkpoint_spec.h"
#include "spec/trainer_spec_env.h"

extern char** environ;

namespace convoy {

std::map<std::string, std::string> BuildRankEnv(const std::map<std::string, std::string>& base,
                                                const v1::Launch& launch, int local_rank, int cores,
                                                const RankFiles& files) {
  std::map<std::string, std::string> env = base;
  for (const auto& [k, v] : launch.spec().env()) env[k] = v;
  const v1::RankResources* given =
      local_rank < launch.resources_size() ? &launch.resources(local_rank) : nullptr;
  if (given != nullptr && given->cpus() > 0) {
    env["OMP_NUM_THREADS"] = std::to_string(given->cpus());
  } else if (env.count("OMP_NUM_THREADS") == 0) {
    env["OMP_NUM_THREADS"] =
        std::to_string(std::max(1, cores / std::max(1, launch.local_world_size())));
  }
  if (given != nullptr && given->gpus_size() > 0) {
    std::string devices;
    for (int g : given->gpus()) devices += (devices.empty() ? "" : ",") + std::to_string(g);
    env["CUDA_VISIBLE_DEVICES"] = devices;
  }
  // The coordinator's plan names every process's RANK (Supervisor::Launch checked it).
  const int rank = launch.ranks(local_rank);
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["WORLD_SIZE"] = std::to_string(launch.world_size());
  env["LOCAL_WORLD_SIZE"] = std::to_string(launch.local_world_size());
  env["GROUP_RANK"] = std::to_string(launch.group_rank());
  env["GROUP_WORLD_SIZE"] = std::to_string(launch.num_nodes());
  env["ROLE_RANK"] = std::to_string(rank);
  env["ROLE_WORLD_SIZE"] = std::to_string(launch.world_size());
  env["ROLE_NAME"] = "default";
  env["MASTER_ADDR"] = launch.master_addr();
  env["MASTER_PORT"] = std::to_string(launch.master_port());
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(launch.restart_count());
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(launch.max_restarts());
  env["TORCHELASTIC_RUN_ID"] = launch.run_id();
  env[rank_contract::kJobIdEnv] = launch.job_id();
  env[rank_contract::kAttemptEnv] = std::to_string(launch.attempt());
  // The job's and the cluster's identity: saved state carries them and a rank resumes only
  // from its own (empty from a coordinator older than them: then left unset).
  if (!launch.job_uid().empty()) env[rank_contract::kJobUidEnv] = launch.job_uid();
  if (!launch.cluster_id().empty()) env[rank_contract::kClusterIdEnv] = launch.cluster_id();
  env[rank_contract::kMaxWorldSizeEnv] =
      std::to_string(std::max(launch.max_world_size(), launch.world_size()));
  env[rank_contract::kMetricsSocketEnv] = files.metrics_socket;
  env[rank_contract::kCheckpointDirEnv] = files.checkpoint_dir;
  // The worker applies the job's checkpoint policy (worker/files/checkpoint_keeper.h).
  if (HasCheckpointPolicy(launch.spec())) env[rank_contract::kCheckpointPolicyEnv] = "1";
  env["PYTHONUNBUFFERED"] = "1";
  if (!files.error_file.empty()) env["TORCHELASTIC_ERROR_FILE"] = files.error_file;
  if (!files.snapshot_dir.empty()) env[rank_contract::kSnapshotDirEnv] = files.snapshot_dir;
  if (!files.preempt_file.empty()) env[rank_contract::kPreemptFileEnv] = files.preempt_file;
  if (!files.resume_from.empty()) {
    env[rank_contract::kResumeFromEnv] = files.resume_from;
    if (!files.resume_from_uid.empty())
      env[rank_contract::kResumeFromUidEnv] = files.resume_from_uid;
  }
  if (!files.cache_dir.empty()) env[rank_contract::kCacheDirEnv] = files.cache_dir;
  if (launch.spec().has_trainer()) {
    v1::TrainerSpec trainer = launch.spec().trainer();
    if (!files.data_dir.empty()) trainer.set_data_dir(files.data_dir);
    env[kTrainerSpecEnv] = EncodeTrainerSpec(trainer);
  }
  return env;
}

bool ReadTorchErrorFile(const std::string& path, v1::ProcessExit* exit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string text(1 << 20, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.empty() || in.peek() != std::char_traits<char>::eof()) return false;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("message")) return false;
  const nlohmann::json& m = j["message"];
  std::string message, callstack;
  if (m.is_string()) {
    message = m.get<std::string>();
  } else if (m.is_object() && m.contains("message") && m["message"].is_string()) {
    message = m["message"].get<std::string>();
    const auto extra = m.find("extraInfo");
    if (extra != m.end() && extra->is_object() && extra->contains("py_callstack") &&
        (*extra)["py_callstack"].is_string()) {
      callstack = (*extra)["py_callstack"].get<std::string>();
    }
  } else {
    return false;
  }
  // "ValueError: bad value": the type is the part before the first ": " when it looks
  // like a (dotted) Python name.
  const size_t colon = message.find(": ");
  std::string type;
  if (colon != std::string::npos && colon > 0 &&
      message.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") >= colon) {
    type = message.substr(0, colon);
    message = message.substr(colon + 2);
  }
  constexpr size_t kMaxTraceback = 8 << 10;
  if (callstack.size() > kMaxTraceback)
    callstack = callstack.substr(callstack.size() - kMaxTraceback);
  exit->set_error_type(type);
  exit->set_error_message(message.substr(0, 4096));
  exit->set_error_traceback(callstack);
  return true;
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  return env;
}

std::map<std::string, std::string> WithMallocHugePages(std::map<std::string, std::string> env) {
  constexpr char kTunable[] = "glibc.malloc.hugetlb";
  std::string& tunables = env["GLIBC_TUNABLES"];
  if (tunables.find(std::string(kTunable) + "=") != std::string::npos) return env;  // theirs
  tunables += std::string(tunables.empty() ? "" : ":") + kTunable + "=1";
  return env;
}

const std::vector<std::string>& DefaultPassEnv() {
  static const std::vector<std::string> kPatterns{
      "PATH",      "LANG",   "LANGUAGE",         "LC_*",   "TZ",
      "TMPDIR",    "HOME",   "LD_LIBRARY_PATH",  "CUDA_*", "NCCL_*",
      "NVIDIA_*",  "GLOO_*", "TP_SOCKET_IFNAME", "OMP_*",  "MKL_*",
      "OPENBLAS_*"};
  return kPatterns;
}

namespace {

bool Matches(const std::string& name, const std::string& pattern) {
  if (!pattern.empty() && pattern.back() == '*') {
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  }
  return name == pattern;
}

}  // namespace

std::map<std::string, std::string> AllowedWorkerEnvironment(
    const std::map<std::string, std::string>& env, const std::vector<std::string>& extra) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : env) {
    bool allowed = false;
    for (const std::string& p : DefaultPassEnv()) allowed = allowed || Matches(name, p);
    for (const std::string& p : extra) allowed = allowed || Matches(name, p);
    if (allowed) out[name] = value;
  }
  return out;
}

}  // namespace convoy

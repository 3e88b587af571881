#include "worker/rank_env.h"

#include <algorithm>
#include <cstring>

extern char** environ;

namespace convoy {

std::map<std::string, std::string> BuildRankEnv(const std::map<std::string, std::string>& base,
                                                const v1::Launch& launch, int local_rank, int cores,
                                                const std::string& metrics_socket,
                                                const std::string& checkpoint_dir) {
  std::map<std::string, std::string> env = base;
  for (const auto& [k, v] : launch.spec().env()) env[k] = v;
  if (env.count("OMP_NUM_THREADS") == 0) {
    env["OMP_NUM_THREADS"] =
        std::to_string(std::max(1, cores / std::max(1, launch.local_world_size())));
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
  env["CONVOY_JOB_ID"] = launch.job_id();
  env["CONVOY_ATTEMPT"] = std::to_string(launch.attempt());
  env["CONVOY_METRICS_SOCKET"] = metrics_socket;
  env["CONVOY_CHECKPOINT_DIR"] = checkpoint_dir;
  env["PYTHONUNBUFFERED"] = "1";
  return env;
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  return env;
}

}  // namespace convoy

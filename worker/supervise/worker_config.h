// What the supervisor and its controllers are given: the worker's configuration as the daemon
// resolved it from its flags (worker/daemon/worker_daemon.h), or as a test sets it. Read-only
// once the supervisor is made; any thread may read it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/exec/cgroups.h"
#include "worker/files/data_cache.h"
#include "worker/host/job_identity.h"
#include "worker/host/nvml.h"
#include "worker/host/users.h"

namespace convoy {

struct WorkerConfig {
  std::string name;
  std::string address;
  std::string hostname;
  std::string work_dir;  // absolute: the worker's own files (rank logs, metrics sockets)
  // Each job's directory is <job_root>/<job id> (its default working and checkpoint
  // directory); the spec's paths must resolve under it (common/job_paths.h). Canonical;
  // empty: <work_dir>/job-root.
  std::string job_root;
  // Read-only roots a trainer.data_dir may also name (canonical).
  std::vector<std::string> data_paths;
  // Roots a checkpoint_dir or working_dir may also name (--shared-path; canonical).
  std::vector<std::string> shared_paths;
  // The user every rank runs as, owner of its job directory and log files; unset: the
  // worker's own (a worker that is not root cannot switch), unless `identities` is set.
  std::optional<RunAsUser> run_as;
  // Set (a root worker, --run-as pool): each job's ranks run as an identity of their own from
  // this pool (worker/host/job_identity.h), and `run_as` is unused.
  std::shared_ptr<JobIdentities> identities;
  // Set (a root worker, --run-as owner): each job's ranks run as the Unix account named as
  // its owner (Launch.owner; never root), and `run_as` is unused.
  bool run_as_owner = false;
  std::string trainer_path;
  int cores = 1;
  int slots = 1;
  std::vector<int> gpus;
  // What Register carries besides: physical memory (bytes, 0: unknown), the GPUs of `gpus`
  // with what is known of each, the --label pairs.
  int64_t memory_bytes = 0;
  std::vector<GpuDeviceInfo> gpu_devices;
  std::map<std::string, std::string> labels;
  int64_t kill_grace_ms = 5000;
  int64_t orphan_timeout_ms = 60000;
  int64_t log_max_bytes = 64 << 20;
  // Base environment of every rank (normally the worker's own, ProcessEnvironment()).
  std::map<std::string, std::string> env;
  // The worker's data cache (worker/files/data_cache.h), passed to every rank as CONVOY_CACHE_DIR
  // and filled before a trainer job's ranks read it; null: none.
  std::shared_ptr<WorkerDataCache> data_cache;
  // Where each job's snapshot directory is made (worker/files/snapshot_dir.h), passed as
  // CONVOY_SNAPSHOT_DIR; empty: none.
  std::string snapshot_root;
  // Set: each rank runs in a cgroup of its own under the worker's subtree
  // (<job dir name>/attempt-N/rank-R), limited to what its job asked (Launch.resources:
  // memory_per_proc, cpus_per_proc) and to `pids_per_rank`; an OOM kill there is reported
  // as such (ProcessExit.oom_killed). Unset: limits cannot be enforced (`cgroups_missing`
  // says why) and a Launch that asks for them is refused.
  std::shared_ptr<Cgroups> cgroups;
  std::string cgroups_missing;
  int64_t pids_per_rank = 8192;
  // Runs on the unpacking thread before each job's code is unpacked (tests hold it there).
  std::function<void(const std::string& sha256)> before_unpack;
  // Runs on the files thread (worker/supervise/off_loop.h) before each resume_from copy, with
  // the directory it makes (tests hold it there).
  std::function<void(const std::string& to)> before_copy;
};

}  // namespace convoy

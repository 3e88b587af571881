// convoy-worker's command line (DESIGN.md "Command-line contract") and its defaults, each
// with the reason for it. --config FILE reads the same options from YAML (keys are the flag
// names, common/config_file.h); flags on the command line win.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/rank_contract.h"
#include "common/status.h"

namespace convoy {

struct ConfigCheck;  // common/config_file.h

struct WorkerFlags {
  // HOST:PORT of the coordinator; CONVOY_COORDINATOR when the flag is absent (as every Convoy
  // program reads it).
  std::string coordinator;
  // Unique worker name, [A-Za-z0-9._-]{1,63}: the coordinator keys workers by it.
  std::string name;
  // Empty: the first non-loopback IPv4 address (the one peers most likely reach), else
  // 127.0.0.1 (a single machine).
  std::string advertise_address;
  // 0: one slot per GPU where there are GPUs (one rank per device), else one per core (a
  // CPU rank wants at least a core).
  int slots = 0;
  // CPU cores this worker may use (0: every core its affinity allows). Several workers
  // sharing one machine each declare their share, so that ranks get the right
  // OMP_NUM_THREADS.
  int cores = 0;
  // Memory this worker offers, as a size (64Gi, 512Mi, 2G, bytes). Empty: MemTotal, lowered
  // to the worker's cgroup memory.max (a container's or unit's limit) when that is smaller.
  std::string memory;
  int64_t memory_bytes = 0;  // --memory parsed (0: discover)
  // GPU indices this worker offers ("0,1"), or "none". Empty: every GPU the machine has
  // (NVML, else /proc/driver/nvidia, else /dev/nvidia<N>), or those of CUDA_VISIBLE_DEVICES
  // when the worker's environment sets it.
  std::string gpus;
  // KEY=VALUE labels (repeatable) that a job's node_selector matches (zone=a, gpu=h100).
  std::vector<std::string> labels;
  std::map<std::string, std::string> label_map;  // --label parsed
  // Where attempts' logs and metrics sockets live (the worker's own files).
  std::string work_dir;
  // When the worker is root, who the ranks run as (a job must never get root because the
  // worker has it): "pool" (the default), an identity of its own per job from
  // `run_as_pool` (worker/host/job_identity.h); "owner", each job as the Unix account named as its
  // owner (a site that maps Convoy users to accounts; never root); or USER, every job's ranks
  // as that one account (jobs not isolated from each other: for single-tenant clusters).
  std::string run_as = "pool";
  // FIRST-LAST: the uids (and gids) --run-as pool gives jobs; no account or group may use
  // them (checked at start). systemd's DynamicUser range by default.
  std::string run_as_pool = "61184-65519";
  // Whether --run-as may name uid 0 (a deliberate choice, never a default).
  bool allow_root_jobs = false;
  // Each job's directory is <job_root>/<job id>; a job's checkpoint_dir, working_dir and
  // data_dir must resolve under it. Empty: <work_dir>/job-root, so that every worker has its
  // own (two workers on one host never unpack into the same directory) and nothing of it
  // lies under another daemon's 0700 state directory. The worker refuses a job root that
  // holds or lies in its own directories, or that its ranks cannot reach
  // (worker/files/job_root.h).
  std::string job_root;
  // Enforced limits (worker/exec/cgroups.h): "auto" runs each rank in a cgroup of its own when
  // the host has a usable hierarchy (and says at start, when not, that limits are not
  // enforced); "required" refuses to start without one; "off" never uses cgroups. Without
  // them, a job that sets memory_per_proc or cpus_per_proc is refused.
  std::string cgroups = "auto";
  // Processes and threads one rank may have at once (its cgroup's pids.max; 0: no limit).
  int64_t pids_per_rank = 8192;
  // Host memory for the ranks' snapshots (worker/files/snapshot_dir.h): empty is
  // /dev/shm/convoy-<name> (else <work_dir>/snapshots); "none" gives the ranks none.
  std::string snapshot_dir;
  // Read-only roots a job's trainer.data_dir may name besides the job root; Debian's
  // dataset packages install under /usr/share/datasets.
  std::vector<std::string> data_paths = {"/usr/share/datasets"};
  // Data directories whose trainer data sets the worker caches at start
  // (worker/files/data_cache.h); default: the trainer's default data directory. "none": nothing at
  // start.
  std::vector<std::string> prefill_data = {rank_contract::kDefaultDataDir};
  // Writable roots a job's checkpoint_dir or working_dir may name besides its own directory
  // (shared between jobs: a team's checkpoint store). None by default: a job writes only
  // into its own directory, never another job's.
  std::vector<std::string> shared_paths;
  // Worker variables the ranks see besides the documented allowlist (rank_env.h,
  // AllowedWorkerEnvironment): NAME or PREFIX*. Nothing else of the worker's environment
  // reaches a rank, so that its secrets never leak into jobs by accident.
  std::vector<std::string> pass_env;
  // Health checks (worker/host/health.h, README "When nodes are sick"): the operator's own
  // program (run with /bin/sh -c; exit 0 within --health-check-timeout is healthy, anything
  // else makes the worker unhealthy with its first lines as the reason), beside the built-in
  // checks (free space in the work dir, job root and snapshot dir; /dev/shm; the GPUs' ECC).
  // Every --health-check-interval seconds and at start; an unhealthy worker gets no new
  // ranks until a check passes. Half a minute notices a failing node before most jobs'
  // first snapshot; the program's timeout leaves room for a slow but working check.
  std::string health_check;
  double health_check_interval_s = 30;
  double health_check_timeout_s = 60;
  // Free space the built-in disk checks require: a rank that cannot write its checkpoint or
  // log fails for the node's reason, not its own.
  std::string health_min_free = "1Gi";
  int64_t health_min_free_bytes = int64_t{1} << 30;  // --health-min-free parsed
  // Plain text to a coordinator on loopback (tests, the local demo); never elsewhere.
  bool insecure = false;
  // Joining a secured cluster (README "Securing a cluster"); CONVOY_JOIN_TOKEN too.
  std::string join_token;
  // --join-token-file: read into join_token at parse (a secret never on a command line).
  std::string join_token_file;
  std::string ca_fingerprint;
  // The operator's own PKI instead (all three): the certificate's name must be --name.
  std::string tls_cert, tls_key, tls_ca;
  // Empty: convoy-trainer next to this binary (how packages and the build lay them out).
  std::string trainer;
  // Warm trainers (worker/exec/warm_trainer.h): 0 starts every rank cold; any other number keeps
  // one pre-loaded convoy-trainer that forks the ranks of built-in-trainer jobs.
  int warm_trainers = 1;
  // The Python interpreter (a path, or a name looked up in the worker's PATH) of a warm
  // Python (worker/exec/warm_trainer.h): a forkserver that has imported torch forks the ranks of
  // `command:` jobs that run a script or a module with that interpreter. Empty: off, every
  // such rank starts cold. Off by default: it keeps an interpreter with torch loaded (about
  // 230 MB) on every worker whether or not Python jobs come, and a forked rank differs from a
  // cold one in a few documented ways (README "Environment of every rank").
  std::string warm_python;
  // The ranks' malloc backs its heap with transparent huge pages (WithMallocHugePages,
  // worker/exec/rank_env.h): a fresh process touching its first hundreds
  // of megabytes takes one page fault per 2 MB rather than per 4 KB. On by default; false
  // leaves GLIBC_TUNABLES as the worker's environment and --pass-env have it.
  bool rank_huge_pages = true;
  // With no coordinator reachable this long, ranks are stopped: nobody could report or stop
  // them any more. A minute rides out a coordinator restart with room to spare.
  double orphan_timeout_s = 60;
  // SIGTERM-to-SIGKILL grace when a Kill names none: long enough for a trainer to finish
  // writing a checkpoint, short enough that a restart is not held up for long.
  int kill_grace_ms = 5000;
  // Per-rank log size before rotation (two rotated files are kept): 64 MiB holds hours of
  // a trainer's per-step lines while bounding the disk a runaway rank can fill (192 MiB).
  int64_t log_max_bytes = 64LL << 20;
  // A finished attempt's directory (its rank logs) is removed this long after it ended
  // (seconds; 0: kept until the job is deleted). A week leaves time to read the logs of a
  // failure found on Monday morning; the job's checkpoints are not affected.
  double attempt_dir_retention_s = 7 * 86400;
  // HOST:PORT of the worker's HTTP endpoint (/metrics, /healthz, /readyz). Empty: none. A
  // bare ":PORT" binds loopback only, like the coordinator's flag: exposing a port beyond
  // this machine is an explicit choice.
  std::string metrics_listen;
  // spdlog level: trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";
  // --check-config: validate everything, start nothing (worker/daemon/check_config.h).
  bool check_config = false;
};

// Parses argv. OK with exit_code 0: run. Otherwise `exit_code` is what main returns: 0 for
// --help/--version, 2 for a usage error. The Status message says what is wrong; it is empty
// when CLI11 printed the help, the version or its own parse error already.
//
// With --check-config among the arguments and `check` given, a configuration problem is no
// usage error: every one found (the command line's, each bad key of the file, each failed
// check after the parse) is appended to check->errors, check->incomplete says whether the
// flags are whole enough to check further, and the result is OK with exit_code 0 (unless
// --help or --version was asked for).
Status ParseWorkerFlags(int argc, char** argv, WorkerFlags* flags, int* exit_code,
                        ConfigCheck* check = nullptr);

// OK when `value` is a CA fingerprint as `convoy-coordinator init` prints it: "SHA256:" (or
// "sha256:") and 64 hex digits, colons between them allowed. Else an error naming `flag`.
Status CheckCaFingerprint(const std::string& flag, const std::string& value);

}  // namespace convoy

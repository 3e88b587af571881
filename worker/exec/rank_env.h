// The environment of one rank process (DESIGN.md "Environment of every training process"):
// torchrun-compatible variables plus Convoy's own. Pure functions; any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "convoy/v1/worker.pb.h"

namespace convoy {

// The per-rank paths a worker gives a rank (empty ones are not set).
struct RankFiles {
  std::string metrics_socket;  // CONVOY_METRICS_SOCKET
  std::string checkpoint_dir;  // CONVOY_CHECKPOINT_DIR
  // TORCHELASTIC_ERROR_FILE: where torch's @record writes the exception of a failing rank
  // (see ReadTorchErrorFile).
  std::string error_file;
  // CONVOY_SNAPSHOT_DIR: host memory for the job's snapshots, kept across its attempts on
  // this worker (README "Fast restarts").
  std::string snapshot_dir;
  // CONVOY_PREEMPT_FILE: created by the worker, holding the reason, just before it sends the
  // rank SIGTERM to save its state and stop (preemption, an elastic resize, drain --now);
  // absent when a SIGTERM means a cancel or a teardown.
  std::string preempt_file;
  // CONVOY_RESUME_FROM: the place spec.resume_from names, resolved under the job root (a
  // checkpoint file or a directory of them); empty when the job starts from nothing of
  // another's. CONVOY_RESUME_FROM_UID: the uid whose state it holds, when it names a job (the
  // trainer accepts that uid's state besides its own; a path names no uid: any is accepted).
  std::string resume_from;
  std::string resume_from_uid;
  // The built-in trainer's data_dir as checked and resolved under the job root (empty: the
  // spec's own): it replaces the spec's in CONVOY_TRAINER_SPEC.
  std::string data_dir;
  // CONVOY_CACHE_DIR: the worker's data cache (worker/files/data_cache.h); empty: none.
  std::string cache_dir;
};

// `base` (the worker's allowlisted environment, AllowedWorkerEnvironment), then the spec's env,
// then Convoy's variables, which always win: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID, CONVOY_JOB_ID,
// CONVOY_ATTEMPT, CONVOY_MAX_WORLD_SIZE, CONVOY_JOB_UID and CONVOY_CLUSTER_ID (when the launch
// has them), the paths of `files` and PYTHONUNBUFFERED=1; for a trainer job, CONVOY_TRAINER_SPEC
// (spec/trainer_spec_env.h: the spec's TrainerSpec, with `files.data_dir`).
// GROUP_WORLD_SIZE and ROLE_NAME are set as torchrun sets them (and job-spec validation
// reserves them).
// Resources: when the launch gives this rank GPUs (Launch.resources), CUDA_VISIBLE_DEVICES
// lists them (always: a rank never sees another rank's devices); when it gives it cores,
// OMP_NUM_THREADS is that number. Otherwise OMP_NUM_THREADS is max(1, cores /
// local_world_size) unless `base` or the spec sets it.
std::map<std::string, std::string> BuildRankEnv(const std::map<std::string, std::string>& base,
                                                const v1::Launch& launch, int local_rank, int cores,
                                                const RankFiles& files);

// Reads a TORCHELASTIC_ERROR_FILE as torch.distributed.elastic's @record writes it,
// {"message": {"message": "ValueError: bad", "extraInfo": {"py_callstack": "Traceback..."}}}
// (a "message" that is a plain string is taken too), into `exit`'s error_type,
// error_message and error_traceback (its last 8 KiB). False, leaving `exit` alone, when
// the file is missing, empty, larger than 1 MiB or not that JSON.
bool ReadTorchErrorFile(const std::string& path, v1::ProcessExit* exit);

// The calling process's environment (environ) as a map.
std::map<std::string, std::string> ProcessEnvironment();

// The part of the worker's environment that its ranks see (issue 18, "private by default"):
// a rank never inherits the worker's secrets (a join token, cloud credentials, a proxy
// password) by accident. Kept: PATH, LANG, LANGUAGE, LC_*, TZ, TMPDIR, HOME (replaced by the
// run-as user's home when ranks run as another user), LD_LIBRARY_PATH, CUDA_*, NCCL_*,
// NVIDIA_*, GLOO_*, TP_SOCKET_IFNAME, OMP_*, MKL_*, OPENBLAS_* (the devices, networks and
// threads of the host), and every name in `extra` (the worker's --pass-env; a trailing '*'
// matches a prefix). Everything else is dropped. A job adds its own variables with the spec's
// `env`.
std::map<std::string, std::string> AllowedWorkerEnvironment(
    const std::map<std::string, std::string>& env, const std::vector<std::string>& extra = {});

// `env` whose GLIBC_TUNABLES also has glibc's malloc (2.35 and later) back its heap and its
// large blocks with transparent huge pages (glibc.malloc.hugetlb=1; where the kernel's THP
// mode is `madvise` or `always`). A fresh rank then faults its state, received buffers and
// first activations in 2 MB at a time rather than 4 KB. On a virtual machine a page fault
// costs microseconds: a 13 MB snapshot took 140 ms to read cold, and a restart's first step
// waited for it (bench/README "Restart under 0.5 s"). (The trainer also keeps blocks under
// 32 MiB in its heap, mallopt in its main: glibc.malloc.mmap_threshold would do that for
// every rank, but a second tunable would show in a cold rank's /proc/PID/environ as a variable
// of its own, glibc cutting the string at ':' in place, and a warm rank's would not.) Tunables
// already there are kept, and a glibc.malloc.hugetlb already set (by --pass-env) is left as it
// is; a job's own GLIBC_TUNABLES (spec `env`) replaces the whole variable, as any variable of
// the spec does.
std::map<std::string, std::string> WithMallocHugePages(std::map<std::string, std::string> env);

// The allowlist above, one pattern per entry (for --help and the README).
const std::vector<std::string>& DefaultPassEnv();

}  // namespace convoy

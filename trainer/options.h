// convoy-trainer's flags and the torchrun-style environment it reads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/rank_contract.h"

namespace convoy::trainer {

// The PowerSGD rank `compression: auto` uses at least, and the uncompressed steps it takes at
// least before it (train.cc Connect).
inline constexpr int kAutoPowerSgdRank = 4;
inline constexpr int64_t kAutoPowerSgdStartStep = 10;

struct Options {
  std::string model = "fmnist-cnn";
  int epochs = 1;
  int64_t max_steps = 0;  // optimiser steps in total; 0 = no limit
  int batch_size = 32;    // per rank, per micro-batch
  double lr = 0.01;
  double momentum = 0.9;
  std::string optimizer = "sgd";
  std::string lr_schedule = "none";
  double clip_grad_norm = 0;
  int accumulate = 1;
  // First bucket 1 MiB, the rest this size, as PyTorch's DDP.
  double bucket_mb = 25;
  int64_t checkpoint_every = 0;  // steps; 0 = at epoch ends only
  std::string checkpoint_dir;    // default: CONVOY_CHECKPOINT_DIR; empty = no checkpoints
  // CONVOY_CHECKPOINT_POLICY: the job has a checkpoint policy, applied by the worker to the
  // checkpoints this trainer marks (a "checkpoint" record each); it then keeps every one it
  // writes. Unset: it keeps the two newest itself.
  bool checkpoints_kept_by_worker = false;
  // Snapshots in host memory (trainer/snapshotter.h): every N optimiser steps; -1 (absent) =
  // auto, about every 2 s of training from the measured step time; 0 = off.
  int64_t snapshot_every = -1;
  std::string snapshot_dir;  // default: CONVOY_SNAPSHOT_DIR; empty = no snapshots
  // The largest WORLD_SIZE the job runs at (--max-world-size, else CONVOY_MAX_WORLD_SIZE; 0:
  // WORLD_SIZE). The learning rate is for that size: at a smaller world it is scaled by
  // WORLD_SIZE / max_world_size (linear scaling with the global batch).
  int max_world_size = 0;
  // CONVOY_PREEMPT_FILE: present when a SIGTERM means "save and stop" (trainer/stop.h).
  std::string preempt_file;
  std::string job_id;  // CONVOY_JOB_ID (snapshots carry it)
  // CONVOY_JOB_UID and CONVOY_CLUSTER_ID: the job's identity. Checkpoints and snapshots carry
  // it, and a run with one resumes only from state of the same identity. Empty (the trainer
  // run by hand): any state of the same model, seed and data set is used, as before.
  std::string job_uid;
  std::string cluster_id;
  // CONVOY_RESUME_FROM (spec.resume_from): a checkpoint file or a directory of them to start
  // from when the job has no state of its own. CONVOY_RESUME_FROM_UID: the job that saved
  // them, whose identity is then accepted; empty: a path the user named, any is accepted.
  std::string resume_from;
  std::string resume_from_uid;
  std::string data_dir = rank_contract::kDefaultDataDir;
  // The per-host cache of decompressed data (trainer/data_cache.h): --data-cache, else
  // CONVOY_CACHE_DIR (set by the worker); empty: every start decompresses the .gz files.
  std::string data_cache;
  int64_t seed = 1234;
  std::string backend = "gloo";
  // How gradients are summed between ranks on one host: "auto" (shared memory when every rank
  // can map it, else the backend), "shm" (shared memory or fail), "gloo" (always the backend).
  std::string allreduce = "auto";
  // Gradient synchronisation: "hooks" (convoy's bucketed all-reduce on autograd hooks) or
  // "reducer" (c10d::Reducer, what PyTorch's Python DDP drives).
  std::string ddp = "hooks";
  // Mixed precision on GPU: "off" or "bf16" (autocast of forward and loss to bfloat16; its
  // exponent range needs no loss scaling). Refused on CPU.
  std::string amp = "off";
  // Gradient compression before the all-reduce (trainer/compression.h): "none", "bf16",
  // "fp16", "powersgd" or "auto" (timed at start-up: none while one all-reduce takes no
  // longer than a step's compute, bf16 up to twice it, else PowerSGD at rank
  // kAutoPowerSgdRank or more, from step kAutoPowerSgdStartStep or later). Only with --ddp
  // hooks.
  std::string compression = "none";
  int powersgd_rank = 2;            // `compression: auto` uses at least kAutoPowerSgdRank
  int64_t powersgd_start_step = 0;  // optimiser steps all-reduced uncompressed first (auto: 10+)
  // Bad steps (trainer/bad_steps.h): skipped ones in a row after which the ranks rewind.
  int64_t max_bad_steps = 3;
  // Benchmarks only (bench/bad_step_check.py): the bad-step checks alternate on and off every
  // this many steps, and the end of the run compares the step times of both (0: always on).
  int64_t bench_step_checks = 0;
  // Test hook (CONVOY_TEST_NAN_LOSS_STEPS, trainer/bad_steps.h): this rank's loss is NaN at
  // these global steps.
  std::vector<int64_t> test_nan_loss_steps;
  int threads = 0;   // absent: OMP_NUM_THREADS, else cores / LOCAL_WORLD_SIZE; --threads >= 1
  bool eval = true;  // test accuracy after each epoch
  bool fill_data_cache = false;  // --fill-data-cache: fill the data cache, train nothing
  int log_every = 50;            // human-readable progress lines
  int pg_timeout_s = 300;
  // Write the final parameters here (rank 0; other ranks to <path>.rank<R>), for tests.
  std::string save_params;
  int64_t train_limit = 0;  // use only the first N training samples (tests, benchmarks)
  // The distributed environment (RANK, WORLD_SIZE, ... as torchrun sets them).
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int group_rank = 0;        // GROUP_RANK: this node's index
  int group_world_size = 1;  // GROUP_WORLD_SIZE: the nodes
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int attempt = 0;
  std::string metrics_socket;
};

// Fills `out` from the job spec's TrainerSpec when the worker gives one
// (ReadTrainerSpecEnvironment), then from argv (the job's --backend and its extra_args, or
// every flag when the trainer is run by hand), then from the environment. Returns an empty
// string, or the error naming the flag, variable or spec field ("--batch-size: expected a
// positive integer, got 'x'", "CONVOY_TRAINER_SPEC: trainer.lr: must be ...").
std::string ParseOptions(int argc, char** argv, Options* out);

// Sets one option from a flag's value: "" or what is wrong with the value.
using FlagSetter = std::function<std::string(const std::string& value)>;
// The flags that take a value (--model, --epochs, ...), each with its check, setting `o`'s
// field. ParseOptions reads argv with them, and the job spec's TrainerSpec is applied through
// them (spec_options.cc: field max_steps is flag --max-steps).
std::map<std::string, FlagSetter> OptionFlags(Options* o);

// The options of CONVOY_TRAINER_SPEC (spec/trainer_spec_env.h), when it is set: "" or the
// error. trainer/spec_options.cc in the Convoy tree; spec_options_standalone.cc (which
// refuses it) in a trainer built on its own.
std::string ReadTrainerSpecEnvironment(Options* out);

}  // namespace convoy::trainer

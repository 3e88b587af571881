#!/usr/bin/env bash
# The GPU half of convoy-trainer, on a machine with an NVIDIA GPU and PyTorch 2.x with CUDA
# (the device machine): build convoy-trainer on its own against that LibTorch with the NCCL
# path, smoke-test NCCL and bf16, then run bench/gpu_vs_torchrun.py. Everything it writes
# goes under $OUT (default: a new temporary directory) and $WORK (default: /tmp/convoy-gpu).
#
#   bench/gpu_check.sh [--build-only]     (CHECKS=0: the bench alone)
#
# Inputs that a bare GPU machine may lack travel in .gpu/ (git-ignored), made here by
# `bench/gpu_check.sh --prepare`: the Fashion-MNIST files, and zlib's and gloo's headers
# (used only where the machine has none).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [[ "${1:-}" == "--prepare" ]]; then
  rm -rf "$ROOT/.gpu" && mkdir -p "$ROOT/.gpu/data" "$ROOT/.gpu/include"
  cp /usr/share/datasets/fashion-mnist/*.gz "$ROOT/.gpu/data/"
  cp /usr/include/zlib.h /usr/include/zconf.h "$ROOT/.gpu/include/"
  cp -r /usr/include/gloo "$ROOT/.gpu/include/"
  du -sh "$ROOT/.gpu"
  exit 0
fi
OUT=${OUT:-$(mktemp -d)}
WORK=${WORK:-/tmp/convoy-gpu}
PY=${PYTHON:-python3}
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$WORK"
say() { echo "== $*" | tee -a "$OUT/summary.txt"; }

{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpu", torch.cuda.get_device_name(0))'
  g++ --version | head -1
  cmake --version | head -1
  nproc
} 2>&1 | tee "$OUT/env.txt"

TORCH_PREFIX=$($PY -c 'import torch; print(torch.utils.cmake_prefix_path)')
TORCH_INC=$($PY -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))')
NCCL_ROOT=$($PY -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)
if [[ -z "$NCCL_ROOT" || ! -f "$NCCL_ROOT/include/nccl.h" ]]; then
  h=$(find / -xdev -name nccl.h -path '*include*' 2>/dev/null | head -1)
  NCCL_ROOT=$(dirname "$(dirname "$h")")
fi
opts=(-G Ninja -DCMAKE_BUILD_TYPE=Release "-DTorch_DIR=$TORCH_PREFIX/Torch"
      "-DCONVOY_NCCL_ROOT=$NCCL_ROOT" "-DCMAKE_CXX_STANDARD=${CXX_STD:-17}")
fallback=()
[[ -d "$TORCH_INC/gloo" ]] || fallback+=("$ROOT/.gpu/include")
if [[ ! -f /usr/include/zlib.h ]]; then
  libz=$(ldconfig -p | awk '/libz\.so\.1 /{print $NF; exit}')
  opts+=("-DZLIB_INCLUDE_DIR=$ROOT/.gpu/include" "-DZLIB_LIBRARY=$libz")
fi
[[ ${#fallback[@]} -gt 0 ]] && opts+=("-DCONVOY_FALLBACK_INCLUDE_DIRS=${fallback[*]}")
say "torch include has gloo: $([[ -d $TORCH_INC/gloo ]] && echo yes || echo no); nccl.h under: $NCCL_ROOT"

build() {
  rm -rf "$WORK/build"
  cmake -S "$ROOT/trainer" -B "$WORK/build" "${opts[@]}" "$@" >"$OUT/configure.log" 2>&1 &&
    ninja -C "$WORK/build" -k 0 convoy-trainer >"$OUT/build.log" 2>&1
}
t0=$(date +%s)
if ! build; then
  if grep -qi 'c++20\|C++20' "$OUT/build.log" "$OUT/configure.log" 2>/dev/null; then
    say "C++17 build failed asking for C++20: again with -DCMAKE_CXX_STANDARD=20"
    opts+=("-DCMAKE_CXX_STANDARD=20")
    build
  fi
fi
TRAINER="$WORK/build/bin/convoy-trainer"
if [[ ! -x "$TRAINER" ]]; then
  say "BUILD FAILED after $(($(date +%s) - t0)) s (configure.log, build.log)"
  tar czf "$OUT/c10d-headers.tgz" -C "$TORCH_INC" torch/csrc/distributed/c10d ATen/autocast_mode.h 2>/dev/null
  grep -m 40 -B2 -A6 'error' "$OUT/build.log" | tail -200
  exit 1
fi
say "built in $(($(date +%s) - t0)) s: $(grep -c 'NCCL path is built' "$OUT/configure.log") NCCL line(s) in configure"
grep 'NCCL' "$OUT/configure.log" | tee -a "$OUT/summary.txt"
ldd "$TRAINER" | grep -i -E 'torch_cuda|nccl|cudart' | tee -a "$OUT/summary.txt"
[[ "${1:-}" == "--build-only" ]] && exit 0

DATA="$ROOT/.gpu/data"
[[ -f "$DATA/train-images-idx3-ubyte.gz" ]] || DATA=/usr/share/datasets/fashion-mnist
say "smoke: one rank, --backend nccl --amp bf16, 200 steps"
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 \
  timeout 120 "$TRAINER" --data-dir "$DATA" --backend nccl --amp bf16 --max-steps 200 \
  --log-every 100 >"$OUT/smoke.log" 2>&1
echo "exit $?" >>"$OUT/smoke.log"
grep -E 'convoy-trainer: rank|rendezvous|loss|summary|exit|rror' "$OUT/smoke.log" | tee -a "$OUT/summary.txt"

# What the sick-node checks and the fast restart do on a GPU (issues 42 and 45; the CPU tests
# cover them elsewhere): the health check's kernel, a NaN step skipped with its verdict computed
# on the device, the per-step check's cost there, and a snapshot of a CUDA model resumed by a
# second attempt (its loss at step 150 against an uninterrupted run's).
one() { RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=${PORT:-29534} timeout 120 "$TRAINER" --data-dir "$DATA" --backend "${BACKEND:-nccl}" "$@"; }
if [[ "${CHECKS:-1}" == 1 ]]; then
  say "health check: --check-devices 0 (expect exit 0), then 0,1 (one GPU: expect exit 1)"
  { "$TRAINER" --check-devices 0; echo "exit $?"; "$TRAINER" --check-devices 0,1; echo "exit $?"; } \
    2>&1 | tee -a "$OUT/summary.txt"
  say "bad steps on the GPU: NaN losses at steps 50 and 51 (CONVOY_TEST_NAN_LOSS_STEPS), 120 steps"
  CONVOY_TEST_NAN_LOSS_STEPS=50,51 one --max-steps 120 --no-eval --log-every 1000 2>&1 |
    grep -E 'bad step|rror|summary' | tee -a "$OUT/summary.txt"
  say "snapshot of a CUDA model, resumed by a second attempt"
  rm -rf "$WORK/snap"
  one --max-steps 150 --no-eval --log-every 50 --snapshot-every 0 2>&1 |
    grep -E 'step 150/|rror' | sed 's/^/uninterrupted: /' | tee -a "$OUT/summary.txt"
  one --max-steps 100 --no-eval --log-every 50 --snapshot-every 50 --snapshot-dir "$WORK/snap" \
    2>&1 | grep -E '^snapshots: [0-9]|rror' | tee -a "$OUT/summary.txt"
  CONVOY_ATTEMPT=1 one --max-steps 150 --no-eval --log-every 50 --snapshot-every 50 \
    --snapshot-dir "$WORK/snap" 2>&1 | grep -E 'resum|step 150/|rror' | tee -a "$OUT/summary.txt"
  say "the per-step bad-step check's cost on the GPU: bench/bad_step_check.py --world 1"
  CONVOY_BIN_DIR="$(dirname "$TRAINER")" timeout 240 $PY "$ROOT/bench/bad_step_check.py" \
    --world 1 --backend "${BACKEND:-nccl}" --repeats 3 --steps 1000 --data-dir "$DATA" 2>&1 |
    tee -a "$OUT/summary.txt"
fi

say "bench/gpu_vs_torchrun.py"
CONVOY_TRAINER="$TRAINER" CONVOY_BENCH_PYTHON="$PY" PYTHONUNBUFFERED=1 \
  timeout "${BENCH_TIMEOUT:-300}" $PY "$ROOT/bench/gpu_vs_torchrun.py" --data-dir "$DATA" \
  ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.txt"

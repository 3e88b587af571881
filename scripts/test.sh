#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, checks formatting, and runs every
# test (unit, integration, trainer, end to end, the bounded scale run) through CTest. Then,
# within a time budget, the thread checks (scripts/thread-checks.sh): the daemons built with
# clang's -Wthread-safety as errors, and the unit and integration tests under ThreadSanitizer.
# Usage: scripts/test.sh [ctest args...]   e.g. scripts/test.sh -L unit
#   CONVOY_SKIP_THREAD_CHECKS=1 skips the clang and TSAN builds (quick local runs);
#   CONVOY_SKIP_TSAN=1 skips only the TSAN stage.
#   CONVOY_SKIP_FUZZ=1 skips the libFuzzer targets (scripts/fuzz.sh: clang build, then
#   FUZZ_SECONDS each, side by side: 10 here, CI's budget; scripts/fuzz.sh alone: 60).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage says how long it took (CI's budget is read from these lines).
stage_start=$SECONDS
stage() {
  echo "== test.sh: $1 took $((SECONDS - stage_start)) s (total $SECONDS s)"
  stage_start=$SECONDS
}
scripts/install-deps.sh
stage "install-deps"

# The thread checks' clang tree and the fuzzers' are built in the background from the start,
# at the lowest CPU and I/O priority: they take only what the main build and the main suite
# leave idle (a build's tail, tests waiting on processes and timers), so most of their
# compiling is done by the time they run. Their own stages below wait for it first.
BG_PID=""
BG_LOG="${BUILD_DIR:-build}-background.log"
if [ $# -eq 0 ] && [ "${CONVOY_SKIP_THREAD_CHECKS:-0}" != 1 ]; then
  # A session of its own, so that the script's exit (a failed stage) stops all of it. With
  # the kernel's autogroups (sched_autogroup_enabled) a new session is a scheduling group of
  # its own that shares the CPU equally with the others whatever its processes' nice values
  # (measured: half the cores, the main build slowed to match): the group itself gets nice 19.
  setsid nice -n 19 ionice -c 3 bash -c '
    if [ -w /proc/self/autogroup ]; then echo 19 >/proc/self/autogroup 2>/dev/null || true; fi
    scripts/thread-checks.sh --build-only || true
    if [ "${CONVOY_SKIP_FUZZ:-0}" != 1 ]; then scripts/fuzz.sh --build-only || true; fi
  ' >"$BG_LOG" 2>&1 &
  BG_PID=$!
fi
cleanup() {
  if [ -n "$BG_PID" ]; then kill -TERM -- "-$BG_PID" 2>/dev/null || true; fi
  if [ -n "${BEFORE:-}" ]; then rm -f "$BEFORE"; fi
}
trap cleanup EXIT
wait_background() {
  if [ -n "$BG_PID" ]; then
    wait "$BG_PID" || true
    BG_PID=""
    stage "the rest of the background builds (thread checks, fuzzers)"
  fi
}
# Without debug information (a third less compile time, much faster links; a failing test
# still names its file and line, and the TSAN build keeps line tables), and at -O1: a third
# to a half less compile time than -O2 (the gRPC services' unity file 28.5 -> 15.1 CPU-s, the
# trainer library's 31.6 -> 20.8), where the tests' CPU goes to LibTorch, gRPC and protobuf,
# which Debian built. Applies when build/ is made.
scripts/build.sh -DCONVOY_WERROR=ON -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"
stage "build"

# Formatting is part of the build's contract (.clang-format at the root).
files=$(git ls-files '*.h' '*.cc' | grep -v '^trainer/compat/' || true)
if [ -n "$files" ] && command -v clang-format >/dev/null; then
  clang-format --dry-run --Werror $files
fi

# What the tests leave behind is checked after them (scripts/leftovers.sh): nothing under
# /dev/shm/convoy-*, /tmp/convoy-* or the daemons' default paths, and no Convoy process.
BEFORE=$(mktemp)
scripts/leftovers.sh list >"$BEFORE"
# Side by side on every core: each e2e file is a test of its own (tests/CMakeLists.txt); what
# must run alone says so (RUN_SERIAL, RESOURCE_LOCK).
# A fresh build tree has no record of how long each test takes, and ctest then starts them in
# the order they were declared, so a long test started last makes a long tail: the committed
# costs (tests/ctest-costs.txt, from a full run) let it start the longest first.
COSTS="${BUILD_DIR:-build}/Testing/Temporary/CTestCostData.txt"
if [ ! -f "$COSTS" ]; then
  mkdir -p "$(dirname "$COSTS")" && cp tests/ctest-costs.txt "$COSTS"
fi
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 1500 -j "$(nproc)" "$@")
stage "ctest"
scripts/leftovers.sh check "$BEFORE"

wait_background
# The job-spec and metric-line parsers under libFuzzer (tests/fuzz/), when all tests run.
if [ "${CONVOY_SKIP_FUZZ:-0}" != 1 ] && [ $# -eq 0 ]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-10} scripts/fuzz.sh
  stage "fuzz"
fi

if [ "${CONVOY_SKIP_THREAD_CHECKS:-0}" = 1 ] || [ $# -gt 0 ]; then
  exit 0
fi
scripts/thread-checks.sh
stage "thread checks"

#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, checks formatting, and runs every
# test (unit, integration, trainer, end to end, the bounded scale run) through CTest. Then,
# within a time budget, the thread checks (scripts/thread-checks.sh): the daemons built with
# clang's -Wthread-safety as errors, and the unit and integration tests under ThreadSanitizer.
# Usage: scripts/test.sh [ctest args...]   e.g. scripts/test.sh -L unit
#   CONVOY_SKIP_THREAD_CHECKS=1 skips the clang and TSAN builds (quick local runs);
#   CONVOY_SKIP_TSAN=1 skips only the TSAN stage.
#   CONVOY_SKIP_FUZZ=1 skips the libFuzzer targets (scripts/fuzz.sh: clang build, then
#   FUZZ_SECONDS each, side by side: 20 here, CI's budget; scripts/fuzz.sh alone: 60).
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
# Without debug information (a third less compile time, much faster links; a failing test
# still names its file and line, and the TSAN build keeps -g). Applies when build/ is made.
scripts/build.sh -DCONVOY_WERROR=ON -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG"
stage "build"

# Formatting is part of the build's contract (.clang-format at the root).
files=$(git ls-files '*.h' '*.cc' | grep -v '^trainer/compat/' || true)
if [ -n "$files" ] && command -v clang-format >/dev/null; then
  clang-format --dry-run --Werror $files
fi

# What the tests leave behind is checked after them (scripts/leftovers.sh): nothing under
# /dev/shm/convoy-*, /tmp/convoy-* or the daemons' default paths, and no Convoy process.
BEFORE=$(mktemp)
trap 'rm -f "$BEFORE"' EXIT
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

# The job-spec and metric-line parsers under libFuzzer (tests/fuzz/), when all tests run.
if [ "${CONVOY_SKIP_FUZZ:-0}" != 1 ] && [ $# -eq 0 ]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-20} scripts/fuzz.sh
  stage "fuzz"
fi

if [ "${CONVOY_SKIP_THREAD_CHECKS:-0}" = 1 ] || [ $# -gt 0 ]; then
  exit 0
fi
scripts/thread-checks.sh
stage "thread checks"

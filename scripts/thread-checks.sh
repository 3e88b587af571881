#!/usr/bin/env bash
# The thread checks CI runs after the main suite, each with a time budget:
#  1. clang -Wthread-safety -Werror over everything but the trainer: every member marked
#     GUARDED_BY is touched only with its mutex held (common/mutex.h).
#  2. (CONVOY_TSAN=1 only) the unit and integration tests built with -fsanitize=thread.
# Build trees: build-tsa/ and build-tsan/ (reused when present).
set -euo pipefail
cd "$(dirname "$0")/.."
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
JOBS=$(nproc)

echo "== thread-safety analysis (clang -Wthread-safety -Werror)"
if [ ! -f build-tsa/CMakeCache.txt ]; then
  CXX=clang++ cmake -S . -B build-tsa "${GEN[@]}" -DCMAKE_BUILD_TYPE=Debug -DCONVOY_WERROR=ON \
    -DCONVOY_BUILD_TRAINER=OFF -DCONVOY_BUILD_TESTS=OFF -DCONVOY_BUILD_BENCH=OFF \
    -DCMAKE_CXX_FLAGS="-Wthread-safety -O0 -g0" >/dev/null
fi
timeout 900 cmake --build build-tsa -j "$JOBS" --target convoy-coordinator convoy-worker convoy

# ThreadSanitizer: `CONVOY_TSAN=1 scripts/thread-checks.sh` builds build-tsan/ and runs the unit
# and integration tests under it. Not in CI yet: with gcc 12 and Debian's uninstrumented
# gRPC/abseil it reports races inside abseil's own synchronisation (GraphCycles) and one unit
# binary dies inside TSAN's runtime (see the scale issue's note).
[ "${CONVOY_TSAN:-0}" = 1 ] || exit 0
echo "== unit and integration tests under ThreadSanitizer"
# Debian's libprotobuf is built without TSAN, and protobuf's map_field.h gives MapFieldBase
# two extra members when __SANITIZE_THREAD__ is defined: our code must see the library's
# layout, so that macro is undefined (the instrumentation itself stays on).
if [ ! -f build-tsan/CMakeCache.txt ]; then
  cmake -S . -B build-tsan "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCONVOY_WERROR=ON \
    -DCONVOY_BUILD_TRAINER=OFF -DCONVOY_BUILD_BENCH=OFF -DCONVOY_SANITIZE=thread \
    -DCMAKE_CXX_FLAGS="-O1 -U__SANITIZE_THREAD__" >/dev/null
fi
timeout 1200 cmake --build build-tsan -j "$JOBS"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
(cd build-tsan && timeout 900 ctest --output-on-failure --timeout 300 -L 'unit|integration')

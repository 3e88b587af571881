#!/usr/bin/env bash
# The thread checks CI runs after the main suite, each with a time budget, in one clang build
# (build-tsan/; with CONVOY_SKIP_TSAN=1 the first alone, in build-tsa/):
#  1. clang -Wthread-safety -Werror over the daemons, the libraries they link and the tests:
#     every member marked GUARDED_BY is touched only with its mutex held (common/mutex.h).
#  2. ThreadSanitizer: the tests that run threads of their own (ctest -L tsan: every
#     integration test, with in-process coordinators, workers and gRPC on loopback, and the
#     unit tests of the threaded parts, tests/CMakeLists.txt CONVOY_TSAN_UNIT_TESTS), built
#     with clang -fsanitize=thread and run with halt_on_error=1: any data race, lock-order
#     inversion or misuse TSAN reports fails CI. Budget: only those test binaries and the
#     daemons are built (the single-threaded unit tests with fake clocks are not), which
#     keeps the stage within about a third of CI's time.
#     Time on this 2-core machine, build-tsan/ from scratch: with a warm ccache about 1.5 min
#     to build (mostly linking) and 1 min to run (288 tests, -j2); with a cold ccache the
#     build is about 12 min of CPU (measured: 22 min wall while two other builds shared the
#     cores; on an idle machine that is roughly 6-8 min, not measured).
#     CONVOY_SKIP_TSAN=1 skips it (quick local runs).
# Usage: scripts/thread-checks.sh [--build-only]   (--build-only: build, run nothing)
# Build trees: build-tsa/ and build-tsan/ (reused when present; ccache when installed).
set -euo pipefail
cd "$(dirname "$0")/.."
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
JOBS=$(nproc)

if [ "${CONVOY_SKIP_TSAN:-0}" = 1 ]; then
  echo "== thread-safety analysis (clang -Wthread-safety -Werror)"
  if [ ! -f build-tsa/CMakeCache.txt ]; then
    CXX=clang++ cmake -S . -B build-tsa "${GEN[@]}" -DCMAKE_BUILD_TYPE=Debug -DCONVOY_WERROR=ON \
      -DCONVOY_BUILD_TRAINER=OFF -DCONVOY_BUILD_TESTS=OFF -DCONVOY_BUILD_BENCH=OFF \
      -DCMAKE_CXX_FLAGS="-Wthread-safety -O0 -g0" >/dev/null
  fi
  timeout 900 cmake --build build-tsa -j "$JOBS" --target convoy-coordinator convoy-worker convoy
  exit 0
fi
# One clang build does both checks: the TSAN build compiles every daemon's code (and the
# tests) with -Wthread-safety as an error too, instead of a second clang build for it alone.
echo "== thread-safety analysis (clang -Wthread-safety -Werror) and"
echo "== unit and integration tests under ThreadSanitizer (clang)"
# clang, not gcc: built with gcc 12, one unit binary died inside TSAN's runtime.
# Layout: Debian's libprotobuf is built without TSAN, and protobuf's map_field.h gives
# MapFieldBase two extra members when __SANITIZE_THREAD__ is defined. gcc defines it under
# -fsanitize=thread, clang 14 does not (it has __has_feature(thread_sanitizer), which only
# changes inline code in protobuf, Abseil and gRPC headers, never a layout): undefine it only
# where the compiler defines it, so our code sees the library's layout either way.
# -gline-tables-only: TSAN's reports need file:line, not full debug information (smaller
# objects, faster compiles and links).
TSAN_FLAGS="-O1 -gline-tables-only -Wthread-safety"
if echo | clang++ -fsanitize=thread -dM -E -x c++ - | grep -q __SANITIZE_THREAD__; then
  TSAN_FLAGS="$TSAN_FLAGS -U__SANITIZE_THREAD__"
fi
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# A build-tsan/ left by the old gcc stage (CONVOY_TSAN=1) is rebuilt with clang.
if [ -f build-tsan/CMakeCache.txt ] &&
  { ! grep -q '^CMAKE_CXX_COMPILER:.*clang' build-tsan/CMakeCache.txt ||
    ! grep -q 'Wthread-safety' build-tsan/CMakeCache.txt; }; then
  rm -rf build-tsan
fi
if [ ! -f build-tsan/CMakeCache.txt ]; then
  CC=clang CXX=clang++ cmake -S . -B build-tsan "${GEN[@]}" "${LAUNCHER[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$TSAN_FLAGS" \
    -DCONVOY_WERROR=ON -DCONVOY_BUILD_TRAINER=OFF -DCONVOY_BUILD_BENCH=OFF \
    -DCONVOY_SANITIZE=thread >/dev/null
fi
read -r -a TSAN_TESTS <build-tsan/tsan-tests.txt
# --build-only: scripts/test.sh builds this tree in the background, at the lowest priority,
# while the main build and the main suite run, and runs the tests once those are done. The
# build's budget: 20 minutes in the foreground; none in the background (there it takes as
# long as the machine's idle time makes it).
BUILD_ONLY=0
BUDGET=(timeout 1200)
if [ "${1:-}" = --build-only ]; then
  BUILD_ONLY=1
  BUDGET=()
fi
# Not the CLI: client/ marks no member GUARDED_BY (its two std::mutex are plain), so the
# analysis has nothing to check there; what it uses of common/ is built and checked here with
# the daemons; and no test that TSAN runs links it. It was about a tenth of this build.
"${BUDGET[@]}" cmake --build build-tsan -j "$JOBS" --target convoy-coordinator convoy-worker \
  "${TSAN_TESTS[@]}"
if [ "$BUILD_ONLY" = 1 ]; then
  exit 0
fi
# Debian's gRPC, Abseil, protobuf, OpenSSL, SQLite and civetweb are not instrumented:
#  - ignore_noninstrumented_modules=1: accesses those libraries make (and the memcpy, malloc
#    and free they call) are not checked; their locks (pthread) still order our code;
#  - tests/tsan/grpc_happens_before.cc (linked into each test binary) tells TSAN the ordering
#    gRPC guarantees through absl::Mutex and its completion queues;
#  - tests/tsan.supp: what is left inside gRPC's own inline code, each with its reason.
# Convoy's code is never suppressed: a report that names it is a bug to fix.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1"
export TSAN_OPTIONS="$TSAN_OPTIONS suppressions=$PWD/tests/tsan.supp"
# Each test case in a process of its own (ctest; only the binaries built above registered
# their tests): a test binary run whole let one test's late gRPC callbacks meet the next
# test's objects in the same process, which no daemon ever does.
status=0
# Two tests per core: at one (-j2 here) the cores were 60 % busy and the stage took 193 s, at
# two 140 s. The test clusters' etcd lease is 10 s (TestCluster::DefaultOptions): at two per
# core, two etcd tests' coordinators lost the 2 s lease of production's default.
(cd build-tsan && timeout 900 ctest --output-on-failure --timeout 300 -j "$((JOBS * 2))" \
  -L 'unit|integration') || status=1
if [ "$status" -ne 0 ]; then
  echo "thread checks: FAILED" >&2
  exit 1
fi
echo "thread checks: the tests of ${#TSAN_TESTS[@]} binaries passed under ThreadSanitizer"

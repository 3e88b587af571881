#!/usr/bin/env bash
# Configures and builds Convoy into build/ (binaries in build/bin/). Arguments go to the first
# configure. CONVOY_BUILD_TARGETS="a b" builds only those targets (and what they need); the
# configuration stays the same, so a later full build (scripts/test.sh) still has every test.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# ccache (scripts/install-deps.sh installs it): a rebuild, or another checkout of the same
# sources (a git worktree: CCACHE_BASEDIR and CCACHE_NOHASHDIR make its paths relative), costs
# little. A fresh CI machine starts cold either way.
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(cd .. && pwd)} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${GEN[@]}" "${LAUNCHER[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
TARGETS=()
if [ -n "${CONVOY_BUILD_TARGETS:-}" ]; then
  read -r -a names <<<"$CONVOY_BUILD_TARGETS"
  TARGETS=(--target "${names[@]}")
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" "${TARGETS[@]}"

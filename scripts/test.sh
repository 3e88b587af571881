#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, checks formatting, and runs every
# test (unit, integration, trainer, end to end) through CTest.
# Usage: scripts/test.sh [ctest args...]   e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DCONVOY_WERROR=ON

# Formatting is part of the build's contract (.clang-format at the root).
files=$(git ls-files '*.h' '*.cc' | grep -v '^trainer/compat/' || true)
if [ -n "$files" ] && command -v clang-format >/dev/null; then
  clang-format --dry-run --Werror $files
fi

cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 1500 "$@"

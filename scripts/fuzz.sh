#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang with ASan and UBSan) into build-fuzz/ and
# runs each for FUZZ_SECONDS (default 60), side by side, on a scratch copy of its corpus in
# tests/fuzz/corpus/ (the kept corpus is not changed). Exits non-zero when a target finds a
# crash, a sanitizer report or a broken property, and prints the reproducer's path.
# Usage: scripts/fuzz.sh            build and fuzz every target
#        scripts/fuzz.sh --merge    also minimise what was found into tests/fuzz/corpus/
#        scripts/fuzz.sh TARGET...  only these (job_spec, metrics_parse)
#        scripts/fuzz.sh --build-only   build the targets, run nothing
# Replay one input: build-fuzz/job_spec_fuzz FILE
set -euo pipefail
cd "$(dirname "$0")/.."

merge=0
build_only=0
targets=()
for arg in "$@"; do
  case "$arg" in
    --merge) merge=1 ;;
    --build-only) build_only=1 ;;
    -h | --help)
      sed -n '2,10p' "$0"
      exit 0
      ;;
    *) targets+=("$arg") ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(job_spec metrics_parse)
seconds="${FUZZ_SECONDS:-60}"
build="${FUZZ_BUILD_DIR:-build-fuzz}"

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (scripts/install-deps.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
fi
if ! ninja -C "$build" $(printf '%s_fuzz ' "${targets[@]}") >"$build/ninja.log" 2>&1; then
  tail -40 "$build/ninja.log" >&2
  echo "fuzz: the build failed (clang, $build)" >&2
  exit 1
fi

if [ "$build_only" = 1 ]; then
  exit 0
fi

out="$build/runs"
rm -rf "$out"
mkdir -p "$out"
pids=()
for t in "${targets[@]}"; do
  mkdir -p "$out/$t/corpus" "$out/$t/artifacts"
  cp -r "tests/fuzz/corpus/$t/." "$out/$t/corpus/"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  # Each target on its own core; -max_len leaves room for real specs and long lines.
  "$build/${t}_fuzz" "$out/$t/corpus" "${dict[@]}" -max_total_time="$seconds" -max_len=8192 \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/$t/artifacts/" >"$out/$t/log" 2>&1 &
  pids+=($!)
done

failed=0
for i in "${!targets[@]}"; do
  t="${targets[$i]}"
  rc=0
  wait "${pids[$i]}" || rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t/log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$out/$t/log" | tail -1 || true)
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "fuzz: $t FAILED (exit $rc); log: $out/$t/log" >&2
    grep -a -E 'PROPERTY VIOLATED|ERROR: |SUMMARY: |runtime error' -A2 "$out/$t/log" | head -20 >&2 || true
    for a in "$out/$t/artifacts"/*; do
      [ -e "$a" ] && echo "fuzz: reproducer: $a   (replay: $build/${t}_fuzz $a)" >&2
    done
  else
    echo "fuzz: $t ok: ${runs:-?} inputs in ${seconds} s, ${cov:-cov: ?}"
  fi
done

if [ "$merge" = 1 ] && [ "$failed" = 0 ]; then
  for t in "${targets[@]}"; do
    before=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
    "$build/${t}_fuzz" -merge=1 -max_len=8192 "tests/fuzz/corpus/$t" "$out/$t/corpus" \
      >"$out/$t/merge.log" 2>&1
    after=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
    echo "fuzz: $t corpus: $before -> $after inputs (tests/fuzz/corpus/$t)"
  done
fi
exit "$failed"

#!/usr/bin/env bash
# Installs everything Convoy needs from Debian's archive and selects OpenBLAS as the
# libblas.so.3 alternative (the reference BLAS makes training about 3x slower).
# Idempotent; skips apt when every package is already installed.
set -euo pipefail

PACKAGES=(
  cmake g++ make ninja-build pkg-config clang-format
  libtorch-dev libgloo-dev libopenblas0-openmp zlib1g-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev libcivetweb-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libyaml-cpp-dev libcli11-dev libspdlog-dev libsqlite3-dev
  dataset-fashion-mnist python3-torch python3-pytest python3-yaml prometheus
  iproute2 procps psmisc libssl-dev clang libclang-rt-14-dev lld
  libsystemd-dev python3-yaml ccache llvm etcd-server etcd-client python3-grpcio
  chromium chromium-driver python3-selenium
)
# chromium, chromium-driver, python3-selenium: the web UI's browser tests (tests/browser,
# ctest -L browser) drive a real headless Chromium; Playwright's and Puppeteer's own browser
# downloads need the internet, Debian's do not.
# python3-grpcio: bench/scale.py --py-storm registers workers from an asyncio Python client
# (bench/scale_py_storm.py), beside the C++ simulator.
# etcd-server: the etcd store's tests start real members on loopback ports (issue 30);
# etcd-client: etcdctl, for operators of an etcd-backed cluster.
# lld: LLVM's linker, for every build (CMakeLists.txt CONVOY_LINKER): a test binary's link
# takes a tenth of GNU ld's time, and the build links about a hundred.
# clang: the fuzzers, -Wthread-safety and the ThreadSanitizer stage (scripts/thread-checks.sh);
# libclang-rt-14-dev: clang's sanitizer runtimes (libclang_rt.tsan, .asan, .fuzzer); ccache
# keeps the TSAN build's second run to linking; llvm (/usr/bin/llvm-symbolizer) gives TSAN's
# reports their file:line (clang only recommends it).
# The deploy tests (tests/deploy, ctest -L deploy) also use, where present: kubectl with
# Kustomize 5 (the machine image's; Debian 12's kubernetes-client is too old for components),
# node and npm (the pinned schema validator, installed by the test under .cache/),
# systemd-analyze, setpriv, cpack/dpkg, and podman + mmdebstrap for the image (optional: the
# test skips with the reason without them).

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The web UI's chart library (issue 43): uPlot from npm, pinned by ui/npm/package-lock.json,
# into .cache/ui-npm (ignored by git); the build embeds it into convoy-coordinator, so
# nothing is fetched at run time. Debian's npm when the machine has none.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
UI_NPM=$ROOT/.cache/ui-npm
if [ ! -f "$UI_NPM/node_modules/uplot/dist/uPlot.iife.min.js" ] ||
   ! cmp -s "$ROOT/ui/npm/package-lock.json" "$UI_NPM/package-lock.json"; then
  if ! command -v npm >/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends npm
  fi
  echo "install-deps: vendoring uPlot from npm into $UI_NPM"
  mkdir -p "$UI_NPM"
  cp "$ROOT/ui/npm/package.json" "$ROOT/ui/npm/package-lock.json" "$UI_NPM/"
  (cd "$UI_NPM" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
fi

OPENBLAS=/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
if [ -e "$OPENBLAS" ]; then
  current=$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || true)
  if [ "$current" != "$(readlink -f $OPENBLAS)" ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "install-deps: selecting OpenBLAS for libblas.so.3"
    $SUDO update-alternatives --set libblas.so.3-x86_64-linux-gnu "$OPENBLAS"
  fi
fi

# Jobs never run as root (issue 12) and never as each other (issue 27): a root
# convoy-worker runs each job as a uid of its own from --run-as-pool (no account needed),
# each job in its own directory under the worker's --job-root (default WORK_DIR/job-root),
# which the worker creates and gives to that uid. The `convoy` system user is for the
# daemons of the package and for --run-as convoy (one shared user). Nothing is
# made under /var/lib here: the coordinator's state directory (0700) is made by
# `convoy-coordinator init`, a worker's directories by the worker.
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! getent passwd convoy >/dev/null; then
  echo "install-deps: creating the system user convoy"
  $SUDO useradd --system --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin convoy
fi

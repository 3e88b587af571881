#!/usr/bin/env bash
# The main job end to end on one machine: installs what is missing, builds, starts a local
# convoy-coordinator and two convoy-worker daemons, submits a 2 nodes x 1 process DDP job
# that trains the Fashion-MNIST CNN for one epoch over Gloo, shows live progress and the
# final test accuracy, and stops everything it started (also on Ctrl-C or failure). It prints
# a login link to the coordinator's web UI at the job's page (`convoy ui JOB`).
#
# It runs the secure default, as a cluster would (README "Securing a cluster"): it makes a
# throwaway cluster CA in its temp dir (convoy-coordinator init), joins the two workers with
# a join token and the CA's fingerprint (mutual TLS), and submits with a user's token over
# TLS. CONVOY_DEMO_INSECURE=1 runs the plain-text loopback mode instead.
#
# Usage: scripts/demo.sh [JOB_SPEC]     (default: examples/fmnist-2x1.yaml)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SPEC=${1:-examples/fmnist-2x1.yaml}

scripts/install-deps.sh
# Only what the demo runs (the tests are most of a full build: scripts/test.sh builds them).
CONVOY_BUILD_TARGETS="convoy-coordinator convoy-worker convoy convoy-trainer" scripts/build.sh
BIN=$ROOT/${BUILD_DIR:-build}/bin

RUN_DIR=$(mktemp -d /tmp/convoy-demo.XXXXXX)
# Run as root, the workers run every rank as the unprivileged `convoy` user, which must reach
# each worker's directory under $RUN_DIR (the state and TLS keys stay 0700 inside): search,
# not listing.
chmod 711 "$RUN_DIR"
# The ranks' snapshots in host memory, the demo's own (not the default /dev/shm/convoy-NAME),
# removed with the daemons.
SHM_DIR=$(mktemp -d /dev/shm/convoy-demo.XXXXXX)
chmod 711 "$SHM_DIR"
PIDS=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ ${#PIDS[@]} -gt 0 ]; then
    # Workers stop their ranks on SIGTERM; the coordinator goes last.
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[i]}" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    done
  fi
  rm -rf "$SHM_DIR"
  echo "demo: stopped the coordinator and workers (logs in $RUN_DIR)"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
METRICS_PORT=$(free_port)
UI_PORT=$(free_port)
export CONVOY_COORDINATOR=127.0.0.1:$PORT

echo "demo: coordinator on $CONVOY_COORDINATOR, metrics on 127.0.0.1:$METRICS_PORT, web UI on 127.0.0.1:$UI_PORT, state in $RUN_DIR"
COORD_SECURITY=(--insecure)
WORKER_SECURITY=(--insecure)
JOIN_TOKEN=
if [ "${CONVOY_DEMO_INSECURE:-0}" != 1 ]; then
  # The two commands that secure a cluster: the CA (its fingerprint pins it on the workers)
  # and a join token for the workers; then a token for the person who submits.
  FINGERPRINT=$("$BIN/convoy-coordinator" init --state-dir "$RUN_DIR/state" 2>/dev/null)
  JOIN_TOKEN=$("$BIN/convoy-coordinator" token create --state-dir "$RUN_DIR/state" \
    --role worker --ttl 1h --uses 2 2>/dev/null)
  export CONVOY_TOKEN=$("$BIN/convoy-coordinator" token create --state-dir "$RUN_DIR/state" \
    --user demo --role user --ttl 1h 2>/dev/null)
  export CONVOY_CA=$RUN_DIR/state/tls/ca.crt
  COORD_SECURITY=()
  # The join token reaches the workers in their environment, never on a command line
  # (/proc/PID/cmdline is readable by every local user).
  WORKER_SECURITY=(--ca-fingerprint "$FINGERPRINT")
  echo "demo: TLS with a throwaway CA $FINGERPRINT; workers join with a token, you submit as 'demo'"
fi
"$BIN/convoy-coordinator" --listen "$CONVOY_COORDINATOR" --state-dir "$RUN_DIR/state" \
  --metrics-listen "127.0.0.1:$METRICS_PORT" --ui-listen "127.0.0.1:$UI_PORT" \
  "${COORD_SECURITY[@]}" >"$RUN_DIR/coordinator.log" 2>&1 &
PIDS+=($!)
for name in w1 w2; do
  # Two workers share this machine: each declares half of its cores.
  CONVOY_JOIN_TOKEN=${JOIN_TOKEN:-} "$BIN/convoy-worker" --coordinator "$CONVOY_COORDINATOR" --name "$name" --slots 1 \
    --cores "$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))" \
    --advertise-address 127.0.0.1 --work-dir "$RUN_DIR/$name" --snapshot-dir "$SHM_DIR/$name" \
    "${WORKER_SECURITY[@]}" \
    >"$RUN_DIR/$name.log" 2>&1 &
  PIDS+=($!)
done

for _ in $(seq 100); do
  ready=$("$BIN/convoy" workers --output json 2>/dev/null | grep -o '"WORKER_READY"' | wc -l || true)
  [ "$ready" -ge 2 ] && break
  sleep 0.2
done
"$BIN/convoy" workers

START=$(date +%s.%N)
JOB=$("$BIN/convoy" submit "$SPEC" --output json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])')
# The web UI beside the job: a one-time login link (valid a minute) to its page, where its
# loss, samples/s and accuracy are drawn live (`convoy ui JOB` makes another).
echo "demo: job $JOB; in a browser: $("$BIN/convoy" ui "$JOB")"
if [ "${CONVOY_DEMO_INSECURE:-0}" != 1 ]; then
  echo "demo:   (HTTPS with the demo's throwaway CA, $CONVOY_CA: the browser asks before trusting it)"
fi
set +e
"$BIN/convoy" watch "$JOB"
rc=$?
set -e
END=$(date +%s.%N)
echo
"$BIN/convoy" status "$JOB" | tail -n 25
awk -v s="$START" -v e="$END" -v j="$JOB" -v rc="$rc" 'BEGIN { printf "demo: job %s finished in %.1f s (exit code %d)\n", j, e - s, rc }'
exit $rc

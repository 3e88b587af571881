#!/usr/bin/env bash
# What a test run leaves behind (issue 26, "nothing is left behind"): entries under
# /dev/shm/convoy-*, /tmp/convoy-*, the daemons' default paths (/var/lib/convoy,
# /var/lib/convoy-worker), workers' cgroups (convoy-* under /sys/fs/cgroup) and Convoy
# processes.
#   scripts/leftovers.sh list          prints them, one a line (sorted)
#   scripts/leftovers.sh check BEFORE  fails, naming them, when there is any not in BEFORE
#                                      (a file written by `list` before the run)
set -euo pipefail

list() {
  shopt -s nullglob
  local p
  for p in /dev/shm/convoy-* /tmp/convoy-* /var/lib/convoy /var/lib/convoy-worker; do
    [ -e "$p" ] && echo "path $p"
  done
  # Workers' cgroups (convoy-NAME-HASH under the cgroup a worker started in), any controller.
  local d
  for d in /sys/fs/cgroup/memory /sys/fs/cgroup/cpu /sys/fs/cgroup/pids /sys/fs/cgroup/unified; do
    [ -d "$d" ] || continue
    find "$d" -maxdepth 6 -type d -name 'convoy-*' -prune -printf 'cgroup %p\n' 2>/dev/null || true
  done
  [ -e /sys/fs/cgroup/cgroup.controllers ] &&
    { find /sys/fs/cgroup -maxdepth 6 -type d -name 'convoy-*' -prune -printf 'cgroup %p\n' 2>/dev/null || true; }
  # Processes by executable name (comm is cut at 15 characters).
  ps -eo pid=,comm= | awk '$2 ~ /^convoy(-coordina|-worker|-trainer|-forkserv)?/ {print "process " $2}' |
    sort -u
}

case "${1:-}" in
  list) list | sort ;;
  check)
    before=${2:?usage: scripts/leftovers.sh check BEFORE}
    new=$(comm -13 "$before" <(list | sort) || true)
    if [ -n "$new" ]; then
      echo "leftovers: the test run left these behind (tests must remove what they make):" >&2
      echo "$new" | sed 's/^/  /' >&2
      exit 1
    fi
    echo "leftovers: none"
    ;;
  *) echo "usage: scripts/leftovers.sh list | check BEFORE" >&2; exit 2 ;;
esac

"""How soon the worker notices that a rank died: the time from a rank's SIGKILL to the
worker's report of its exit (its `rank R (pid P) killed by SIGKILL` log line, written right
before the ProcessExited message is sent). Not a test.

A coordinator and one worker on loopback. Each repeat submits a one-rank job, waits for the
rank's process, records the wall-clock time, sends SIGKILL and reads the worker's log line
(millisecond timestamps). `--kind command` runs `sleep` (a cold fork/exec: the worker is the
rank's parent); `--kind child` runs a shell that leaves a child behind holding the rank's
stdout and stderr (as DataLoader workers or a wrapper script do), so that the pipes do not
close when the rank dies; `--kind trainer` runs the built-in trainer, forked by the warm
trainer (the warm trainer is the rank's parent and reports the exit to the worker).

  bench/exit_latency.py [--kind command|child|trainer] [--repeats 20] [--bin-dir DIR]
                        [--worker-flag=--warm-trainers=0]
"""

import argparse
import datetime
import os
import re
import signal
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))

_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) \S+ worker \S+: (.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def exit_logged(text, pid):
    """Unix time of the worker's line reporting that `pid` was killed, else None."""
    for line in text.splitlines():
        m = _LOG_LINE.match(_ANSI.sub("", line))
        if m and re.search(rf"\(pid {pid}\) killed by SIGKILL", m.group(2)):
            return datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
    return None


def group_leader(pids):
    """The rank itself among its processes: the leader of its process group."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[2]) == pid:
                    return pid
        except OSError:
            pass
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", choices=["command", "child", "trainer"], default="command")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--worker-flag", action="append", default=[],
                   help="another flag for the worker, e.g. --worker-flag=--warm-trainers=0")
    p.add_argument("--bin-dir", default=os.path.join(ROOT, "build/bin"))
    args = p.parse_args()
    os.environ["CONVOY_BIN_DIR"] = os.path.abspath(args.bin_dir)
    import cluster  # reads CONVOY_BIN_DIR at import

    c = cluster.Cluster(workers=1, slots=1, worker_extra=args.worker_flag)
    delays = []
    try:
        if args.kind == "trainer" and "--warm-trainers=0" not in args.worker_flag:
            cluster.wait_for(lambda: "warm trainer ready" in c.logs_of("w1"), 60,
                             "the warm trainer")
        for i in range(args.repeats):
            if args.kind in ("command", "child"):
                argv = (["sleep", "1000"] if args.kind == "command" else
                        ["sh", "-c", "sleep 1000 & exec sleep 1001"])
                spec = {"name": f"sleep-{i}", "nodes": 1, "procs_per_node": 1,
                        "command": argv, "max_restarts": 0}
            else:
                spec = cluster.trainer_spec(name=f"t-{i}", nodes=1, max_steps=10000000)
                spec["max_restarts"] = 0
            job = c.submit(spec)
            time.sleep(0.3 if args.kind != "trainer" else 1.0)  # running, not starting
            pid = cluster.wait_for(lambda: group_leader(c.job_pids(job)), 60,
                                   f"the rank of {job}", interval=0.02)
            t0 = time.time()
            os.kill(pid, signal.SIGKILL)
            logged = cluster.wait_for(lambda: exit_logged(c.logs_of("w1"), pid), 30,
                                      f"the worker's report of {pid}", interval=0.02)
            delays.append((logged - t0) * 1000.0)
            c.wait_state(job, {"FAILED"}, timeout=60)
            print(f"{args.kind} {i + 1}/{args.repeats}: {delays[-1]:.1f} ms", flush=True)
    finally:
        c.close()
    delays.sort()
    print(f"SIGKILL -> exit reported ({args.kind}, {len(delays)} kills): "
          f"median {statistics.median(delays):.1f} ms, "
          f"p90 {delays[int(0.9 * (len(delays) - 1))]:.1f} ms, max {delays[-1]:.1f} ms "
          "(log timestamps: 1 ms resolution)")


if __name__ == "__main__":
    main()

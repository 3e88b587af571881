"""What snapshots in host memory (issue 17) cost training: the same 2-rank convoy-trainer run
(the Fashion-MNIST CNN, 2 x 32, one intra-op thread per rank, shared-memory all-reduce) with
snapshots off (--snapshot-every 0) and at the auto interval (about every 2 s of training, in
a directory on /dev/shm), alternating, median samples/s of each and their ratio; beside it the
trainer's own account (milliseconds the training thread spends copying per snapshot, CPU
milliseconds of the background writer) and the cost it measures within each run: the steps
during which a snapshot was copied or written against the others, so that the machine's load,
which drifts between runs, cancels out. --baseline-bin DIR adds a third variant, another
build's convoy-trainer (e.g. the one before issue 16), run with no snapshot flags. Not a test.

  python3 bench/snapshot_cost.py [--repeats 5] [--steps 600] [--baseline-bin /tmp/before-bin]
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CONVOY_BIN_DIR", os.path.join(ROOT, "build/bin"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_output import summaries  # noqa: E402

_SNAP = re.compile(r"^snapshots: (\d+) written, (\d+) skipped .*; per snapshot ([0-9.]+) ms copying "
                   r"in the training thread \(([0-9.]+) % of the training time\), ([0-9.]+) ms "
                   r"writing in the background \(([0-9.]+) ms of CPU\)$", re.M)
_EVERY = re.compile(r"^snapshots: every (\d+) steps \(auto", re.M)
_COST = re.compile(r"^snapshot cost: (\d+) steps while one was copied or written took ([0-9.]+) ms "
                   r"each, the other (\d+) ([0-9.]+) ms: (-?[0-9.]+) % of the training time$", re.M)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(binary, extra, steps):
    port = free_port()
    procs = []
    for r in range(2):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVOY_")}
        env.update(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(
            [binary, "--max-steps", str(steps), "--no-eval", "--threads", "1", "--batch-size",
             "32", "--log-every", "100000", *extra],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs):
        if p.returncode != 0:
            raise SystemExit(f"{binary} exited {p.returncode}:\n{out[-3000:]}")
    rate = min(s["samples_per_s"] for out in outs for s in summaries(out))
    snap = _SNAP.search(outs[0])
    every = _EVERY.search(outs[0])
    cost = _COST.search(outs[0])
    return rate * 2, snap, every, cost  # summaries report one rank's samples/s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--baseline-bin", default="")
    a = ap.parse_args()
    trainer = os.path.join(BIN, "convoy-trainer")
    variants = {"off": (trainer, ["--snapshot-every", "0"])}
    snap_dir = tempfile.mkdtemp(prefix="convoy-snapshot-cost-", dir="/dev/shm")
    variants["auto"] = (trainer, ["--snapshot-dir", snap_dir])
    if a.baseline_bin:
        variants["baseline"] = (os.path.join(a.baseline_bin, "convoy-trainer"), [])
    rates = {k: [] for k in variants}
    in_run = []
    try:
        for i in range(a.repeats):
            line = []
            for name, (binary, extra) in variants.items():
                rate, snap, every, cost = run(binary, extra, a.steps)
                rates[name].append(rate)
                line.append(f"{name} {rate:.0f} samples/s")
                if snap:
                    line.append(f"(every {every.group(1) if every else '?'} steps: "
                                f"{snap.group(1)} written, {snap.group(3)} ms copy = "
                                f"{snap.group(4)} % of training, background {snap.group(5)} ms "
                                f"wall / {snap.group(6)} ms CPU each)")
                if cost:
                    in_run.append(float(cost.group(5)))
                    line.append(f"(in the run: {cost.group(1)} steps with a snapshot in flight "
                                f"{cost.group(2)} ms, {cost.group(3)} without {cost.group(4)} ms: "
                                f"{cost.group(5)} %)")
                shutil.rmtree(snap_dir, ignore_errors=True)
            print(f"run {i + 1}: " + ", ".join(line), flush=True)
    finally:
        shutil.rmtree(snap_dir, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"\nmedian of {a.repeats}, 2 ranks x 32, {a.steps} steps: " +
          ", ".join(f"{k} {v:.0f} samples/s" for k, v in med.items()))
    print(f"snapshots at the auto interval cost {100 * (1 - med['auto'] / med['off']):.2f} % "
          f"(auto / off = {med['auto'] / med['off']:.4f}) between runs")
    if in_run:
        print(f"within the runs (steps with a snapshot being copied or written against the "
              f"others): median {statistics.median(in_run):.2f} % of the training time, per run "
              f"{in_run}")
    if "baseline" in med:
        print(f"this build with snapshots off / baseline = {med['off'] / med['baseline']:.4f}")


if __name__ == "__main__":
    main()

"""What snapshots in host memory (issue 17) cost training: the same 2-rank convoy-trainer run
(the Fashion-MNIST CNN, 2 x 32, one intra-op thread per rank, shared-memory all-reduce) with
snapshots off (--snapshot-every 0) and at the auto interval (about every 2 s of training, in
a directory on /dev/shm), alternating, median samples/s of each and their ratio; beside it the
trainer's own account (milliseconds the training thread spends copying per snapshot, CPU
milliseconds of the background writer). --baseline-bin DIR adds a third variant, another
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
    return rate * 2, snap, every  # summaries report one rank's samples/s


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
    try:
        for i in range(a.repeats):
            line = []
            for name, (binary, extra) in variants.items():
                rate, snap, every = run(binary, extra, a.steps)
                rates[name].append(rate)
                line.append(f"{name} {rate:.0f} samples/s")
                if snap:
                    line.append(f"(every {every.group(1) if every else '?'} steps: "
                                f"{snap.group(1)} written, {snap.group(3)} ms copy = "
                                f"{snap.group(4)} % of training, background {snap.group(5)} ms "
                                f"wall / {snap.group(6)} ms CPU each)")
                shutil.rmtree(snap_dir, ignore_errors=True)
            print(f"run {i + 1}: " + ", ".join(line), flush=True)
    finally:
        shutil.rmtree(snap_dir, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"\nmedian of {a.repeats}, 2 ranks x 32, {a.steps} steps: " +
          ", ".join(f"{k} {v:.0f} samples/s" for k, v in med.items()))
    print(f"snapshots at the auto interval cost {100 * (1 - med['auto'] / med['off']):.2f} % "
          f"(auto / off = {med['auto'] / med['off']:.4f})")
    if "baseline" in med:
        print(f"this build with snapshots off / baseline = {med['off'] / med['baseline']:.4f}")


if __name__ == "__main__":
    main()

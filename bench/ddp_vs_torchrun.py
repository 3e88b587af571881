"""Side by side, in one run on this machine: convoy-trainer vs torchrun + Python DDP
(bench/torch_ddp.py on Debian's python3-torch), the same model, data, global batch,
optimiser and thread settings, world sizes 1 and 2, runs alternating. Prints a table and
the ratios. Not a test: it asserts nothing.

  bench/ddp_vs_torchrun [--steps 300] [--repeats 3] [--to-accuracy]
"""

import argparse
import glob
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINER = os.environ.get("CONVOY_TRAINER", os.path.join(ROOT, "build/bin/convoy-trainer"))
PY = os.environ.get("CONVOY_BENCH_PYTHON", "/usr/bin/python3")  # the GPU machine: python3
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_output import parse_accuracy, summaries  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_convoy(world, args):
    port = free_port()
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        env.pop("CONVOY_METRICS_SOCKET", None)
        env.pop("CONVOY_CHECKPOINT_DIR", None)
        procs.append(subprocess.Popen([TRAINER, *args], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    out = "".join(p.communicate()[0] for p in procs)
    return summaries(out), out


def run_torchrun(world, args):
    # --redirects/--tee spelled out: Debian's torchrun 1.13 on Python 3.11 crashes on the
    # defaults (IntFlag no longer iterates NONE/ALL); stdout is tee'd with a rank prefix.
    # The tee'd console output of two ranks can interleave within a line; each rank's own
    # stdout.log under --log_dir cannot, so the summaries are read from those.
    with tempfile.TemporaryDirectory(prefix="torchrun-logs-") as log_dir:
        cmd = [PY, "-m", "torch.distributed.run", "--redirects", "2", "--tee", "1",
               "--log_dir", log_dir, "--nproc_per_node", str(world),
               "--master_port", str(free_port()), os.path.join(ROOT, "bench/torch_ddp.py"), *args]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        per_rank = ""
        for path in sorted(glob.glob(os.path.join(log_dir, "*", "attempt_*", "*", "stdout.log"))):
            with open(path, errors="replace") as f:
                per_rank += f.read() + "\n"
    out = r.stdout + r.stderr
    s = summaries(per_rank)
    return (s if len(s) == world else summaries(out)), out


# (label, world, runner, extra convoy-trainer flags)
VARIANTS = [
    ("convoy", 1, "convoy", []),
    ("torchrun", 1, "torchrun", []),
    ("convoy", 2, "convoy", []),  # defaults: hooks, shared memory between ranks on one host
    ("convoy gloo", 2, "convoy", ["--allreduce", "gloo"]),  # the transport Python DDP uses
    ("convoy reducer", 2, "convoy", ["--ddp", "reducer"]),  # c10d::Reducer + shared memory
    ("convoy reducer gloo", 2, "convoy", ["--ddp", "reducer", "--allreduce", "gloo"]),
    ("torchrun", 2, "torchrun", []),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300, help="optimiser steps per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--to-accuracy", action="store_true",
                    help="also train 3 epochs at world size 2 and report seconds to 88%%")
    a = ap.parse_args()
    threads_for = {1: 2, 2: 1}  # both cores in use, never oversubscribed
    results = {}
    for rep in range(a.repeats):
        for label, world, runner, extra in VARIANTS:
            batch = 64 // world  # the same global batch of 64
            common = ["--batch-size", str(batch), "--max-steps", str(a.steps), "--no-eval",
                      "--threads", str(threads_for[world])]
            fn = run_convoy if runner == "convoy" else run_torchrun
            t0 = time.time()
            s, out = fn(world, common + extra)
            if len(s) != world:
                print(f"{label} world {world} failed:\n{out[-3000:]}", file=sys.stderr)
                sys.exit(1)
            results.setdefault((label, world), []).append({
                "samples_per_s": sum(x["samples_per_s"] for x in s),
                "first_step_s": max(x["first_step_s"] for x in s),
                "peak_rss_mb": max(x["peak_rss_mb"] for x in s),
                "wall_s": time.time() - t0})
            print(f"  run {rep + 1}: {label:20s} world {world}: "
                  f"{results[(label, world)][-1]['samples_per_s']:7.0f} samples/s", flush=True)

    def med(name, world, key):
        return statistics.median(r[key] for r in results[(name, world)])

    print(f"\nFashion-MNIST CNN, global batch 64, SGD lr 0.01 momentum 0.9, {a.steps} steps, "
          f"median of {a.repeats}; world 1 uses 2 threads, world 2 one thread per rank")
    print(f"{'':28s}{'convoy':>10s}{'torchrun':>10s}{'ratio':>8s}")
    for world in (1, 2):
        for key, label, fmt in (("samples_per_s", "samples/s", "{:10.0f}"),
                                ("first_step_s", "first step (s)", "{:10.2f}"),
                                ("peak_rss_mb", "peak RSS/rank (MB)", "{:10.0f}")):
            c, t = med("convoy", world, key), med("torchrun", world, key)
            print(f"world {world} {label:22s}" + fmt.format(c) + fmt.format(t) +
                  f"{c / t:8.2f}")
    t2 = med("torchrun", 2, "samples_per_s")
    c1 = med("convoy", 1, "samples_per_s")
    print("\nworld 2 variants      samples/s  vs torchrun  vs one process (both cores, no comm)")
    for label, world, runner, _ in VARIANTS:
        if world == 2 and runner == "convoy":
            v = med(label, 2, "samples_per_s")
            print(f"  {label:20s}{v:10.0f}{v / t2:12.2f}{v / c1:12.2f}")
    print(f"  {'torchrun':20s}{t2:10.0f}{1:12.2f}{t2 / c1:12.2f}")

    if a.to_accuracy:
        print("\nseconds from process start to 88% test accuracy, world 2 (up to 3 epochs, "
              "evaluated after each):")
        for name, fn in (("convoy", run_convoy), ("torchrun", run_torchrun)):
            s, out = fn(2, ["--batch-size", "32", "--epochs", "3", "--threads", "1"])
            reached = None
            for line in out.splitlines():
                parsed = parse_accuracy(line)  # None for interleaved or malformed lines
                if parsed is not None and parsed[0] == 0:
                    _, _, acc, at = parsed
                    print(f"  {name}: {line.strip()}")
                    if reached is None and acc >= 88.0:
                        reached = at
            print(f"  {name}: " + (f"88% after {reached:.1f} s" if reached else "88% not reached"))


if __name__ == "__main__":
    main()

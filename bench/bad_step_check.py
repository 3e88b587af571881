"""What the per-step bad-step check (issue 42, trainer/bad_steps.h) costs training: the same
2-rank convoy-trainer run (the Fashion-MNIST CNN, 2 x 32, one intra-op thread per rank,
shared-memory all-reduce, snapshots off) with --bench-step-checks N, which turns the check off
and on in alternate blocks of N steps within the run, so that the machine's load, which drifts
between runs by more than the effect, cancels out. Reported per run and as medians:

- the trainer's own account: the milliseconds its training thread spends on the check a step
  (reading each micro-batch's loss, the verdict into the control floats, keeping the model's
  buffers) as a share of the step time ("the checks took ..." line);
- the step time of the blocks with the check against those without (on / off).

The check's verdict rides as a third control float in the step's gradient all-reduce, which
both kinds of block send, so neither figure includes those 4 bytes. With --clip-grad-norm C
the gradient norm is checked too (clipping computes it either way). Not a test.

  python3 bench/bad_step_check.py [--repeats 5] [--steps 400] [--block 10] [--clip-grad-norm 0]
                                  [--world 2] [--backend gloo]

On a GPU machine (bench/gpu_check.sh): --world 1 --backend nccl, one rank on the GPU, where
the verdict is computed on the device.
"""

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CONVOY_BIN_DIR", os.path.join(ROOT, "build/bin"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_output import summaries  # noqa: E402

_OWN = re.compile(r"^bad steps: (\d+) skipped, (\d+) rewind\(s\); the checks took ([0-9.]+) ms a "
                  r"step \(([0-9.]+) % of ([0-9.]+) ms a step\)$", re.M)
_AB = re.compile(r"^step checks, on and off every (\d+) steps: on ([0-9.]+) ms a step \((\d+) "
                 r"steps\), off ([0-9.]+) ms \((\d+) steps\): on/off ([0-9.]+)$", re.M)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(binary, steps, block, clip, world, backend, data_dir):
    port = free_port()
    procs = []
    for r in range(world):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVOY_")}
        env.update(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        data = ["--data-dir", data_dir] if data_dir else []
        procs.append(subprocess.Popen(
            [binary, "--max-steps", str(steps), "--no-eval", "--threads", "1", "--batch-size",
             "32", "--log-every", "100000", "--snapshot-every", "0", "--bench-step-checks",
             str(block), "--clip-grad-norm", str(clip), "--backend", backend] + data,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs):
        if p.returncode != 0:
            raise SystemExit(f"{binary} exited {p.returncode}:\n{out[-3000:]}")
    own = [_OWN.search(out) for out in outs]
    ab = [_AB.search(out) for out in outs]
    if not all(own) or not all(ab):
        raise SystemExit("no 'bad steps:' or 'step checks' line in the trainer's output:\n" +
                         outs[0][-3000:])
    rate = min(s["samples_per_s"] for out in outs for s in summaries(out))
    # The slower rank's figures: the step waits for both.
    own_pct = max(float(m.group(4)) for m in own)
    own_ms = max(float(m.group(3)) for m in own)
    ratio = max(float(m.group(6)) for m in ab)
    on_ms, off_ms = float(ab[0].group(2)), float(ab[0].group(4))
    return rate * world, own_ms, own_pct, ratio, on_ms, off_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--clip-grad-norm", type=float, default=0)
    ap.add_argument("--world", type=int, default=2, help="ranks (1: one GPU rank with nccl)")
    ap.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    ap.add_argument("--data-dir", default="", help="the trainer's default when empty")
    a = ap.parse_args()
    trainer = os.path.join(BIN, "convoy-trainer")
    pcts, ratios = [], []
    for i in range(a.repeats):
        rate, own_ms, own_pct, ratio, on_ms, off_ms = run(trainer, a.steps, a.block,
                                                          a.clip_grad_norm, a.world, a.backend,
                                                          a.data_dir)
        pcts.append(own_pct)
        ratios.append(ratio)
        print(f"run {i + 1}: {rate:.0f} samples/s; the check {own_ms:.4f} ms a step "
              f"({own_pct:.3f} % of the step); blocks of {a.block} steps: on {on_ms:.2f} ms, "
              f"off {off_ms:.2f} ms a step, on/off {ratio:.4f}", flush=True)
    print(f"\nmedian of {a.repeats}, {a.world} rank(s) x 32 over {a.backend}, {a.steps} steps, "
          f"clip_grad_norm {a.clip_grad_norm:g}: the check costs the training thread "
          f"{statistics.median(pcts):.3f} % of the step time (goal: under 1 %); step time with "
          f"the check / without, within the runs: {statistics.median(ratios):.4f} "
          f"(per run {', '.join(f'{r:.4f}' for r in ratios)})")


if __name__ == "__main__":
    main()

"""One GPU, side by side in one run: convoy-trainer built against the machine's CUDA LibTorch
(`--backend nccl`: a one-rank NCCL group whose gradients are all-reduced on the GPU, as
DDP's are) vs torchrun + Python DDP over NCCL (bench/torch_ddp.py --device cuda), the same
model, data, batch, optimiser, seed and CPU threads, with and without bf16 autocast
(`--amp bf16` on both sides). Runs alternate (the order flips every repeat); medians and
ratios are printed, then one epoch of each with its test accuracy. Not a test: it asserts
nothing. bench/gpu_check.sh builds the trainer and runs this on a GPU machine.

  CONVOY_TRAINER=... CONVOY_BENCH_PYTHON=python3 \\
      python3 bench/gpu_vs_torchrun.py --data-dir DIR [--steps 1000] [--repeats 3]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_vs_torchrun as pair  # noqa: E402


def one(side, amp, common):
    if side == "convoy":
        return pair.run_convoy(1, common + ["--backend", "nccl", "--amp", amp])
    return pair.run_torchrun(1, common + ["--device", "cuda", "--amp", amp])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--steps", type=int, default=1000, help="optimiser steps per timed run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--no-accuracy", action="store_true", help="skip the one-epoch accuracy runs")
    a = ap.parse_args()
    base = ["--data-dir", a.data_dir, "--batch-size", str(a.batch_size), "--threads",
            str(a.threads), "--seed", "1234"]
    results = {}
    shown = False
    for rep in range(a.repeats):
        for amp in ("off", "bf16"):
            sides = ("convoy", "torchrun") if rep % 2 == 0 else ("torchrun", "convoy")
            for side in sides:
                t0 = time.time()
                s, out = one(side, amp, base + ["--max-steps", str(a.steps), "--no-eval"])
                if len(s) != 1:
                    print(f"{side} amp {amp} failed:\n{out[-4000:]}", file=sys.stderr)
                    sys.exit(1)
                if side == "convoy" and not shown:
                    # What the trainer says of its backend: NCCL, the GPU, the process group.
                    for line in out.splitlines():
                        if line.startswith(("convoy-trainer: rank", "rendezvous with", "model ")):
                            print("  " + line)
                    shown = True
                r = {"samples_per_s": s[0]["samples_per_s"], "first_step_s": s[0]["first_step_s"],
                     "peak_rss_mb": s[0]["peak_rss_mb"], "wall_s": time.time() - t0}
                results.setdefault((side, amp), []).append(r)
                print(f"  run {rep + 1}: {side:8s} amp {amp:4s}: {r['samples_per_s']:9.0f} "
                      f"samples/s, wall {r['wall_s']:.1f} s", flush=True)

    def med(side, amp, key):
        return statistics.median(r[key] for r in results[(side, amp)])

    print(f"\nOne GPU, Fashion-MNIST CNN, batch {a.batch_size}, SGD lr 0.01 momentum 0.9, "
          f"{a.steps} steps, NCCL on both sides, median of {a.repeats}")
    print(f"{'':30s}{'convoy':>10s}{'torchrun':>10s}{'ratio':>8s}")
    for amp in ("off", "bf16"):
        for key, label, fmt in (("samples_per_s", "samples/s", "{:10.0f}"),
                                ("first_step_s", "first step (s)", "{:10.2f}"),
                                ("wall_s", "wall per run (s)", "{:10.1f}"),
                                ("peak_rss_mb", "peak RSS (MB)", "{:10.0f}")):
            c, t = med("convoy", amp, key), med("torchrun", amp, key)
            print(f"amp {amp:4s} {label:21s}" + fmt.format(c) + fmt.format(t) + f"{c / t:8.2f}")
    if a.no_accuracy:
        return
    print("\none epoch, test accuracy after it (same seed):")
    for amp in ("off", "bf16"):
        accs = {}
        for side in ("convoy", "torchrun"):
            s, out = one(side, amp, base + ["--epochs", "1"])
            accs[side] = s[0]["test_accuracy"] * 100 if len(s) == 1 else float("nan")
            if len(s) != 1:
                print(f"{side} amp {amp} failed:\n{out[-2000:]}", file=sys.stderr)
        print(f"  amp {amp:4s}: convoy {accs['convoy']:.2f} %, torchrun {accs['torchrun']:.2f} %, "
              f"difference {accs['convoy'] - accs['torchrun']:+.2f} points", flush=True)


if __name__ == "__main__":
    main()

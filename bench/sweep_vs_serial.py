"""A 3-trial learning-rate sweep of the built-in trainer against the same 3 trials submitted
one by one (README "Sweeps"). Not a test.

One coordinator and one worker with --slots 3 on loopback (real binaries). Three ways to run
trainer.lr 0.1, 0.01, 0.001 (Fashion-MNIST CNN, 1x1, --max-steps):
  sweep       `convoy submit spec.yaml` with sweep: {max_parallel: P}: submit -> the sweep's
              SUCCEEDED event
  one by one  a shell loop: `convoy submit --watch --set trainer.lr=X` three times, each after
              the previous ended: the loop's wall time
  all at once three `convoy submit --set trainer.lr=X` back to back, then waiting for every
              one to end: the first submit to the last end
and prints each wall time, its ratio to the sweep's, and the sweep's `convoy status`.

With --max-parallel 1 it also prints, for the sweep and for the loop, the time between one
trial's end and the next one's creation: what running trials one after another costs beyond
the trials themselves, which the machine's load moves far less than the wall times.

  bench/sweep_vs_serial.py [--max-steps 100] [--max-parallel 3] [--bin-dir DIR]
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
LRS = ["0.1", "0.01", "0.001"]


def base_spec(max_steps):
    return {"name": "lr", "nodes": 1, "procs_per_node": 1, "backend": "gloo",
            "trainer": {"model": "fmnist-cnn", "batch_size": 64, "lr": 0.01,
                        "max_steps": max_steps},
            "env": {"OMP_NUM_THREADS": "1"}}


def ended_s(job):
    for e in job.get("events", []):
        if e.get("to") in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return int(e["time_unix_ms"]) / 1000.0
    return None


def created_s(job):
    return int(job["created_unix_ms"]) / 1000.0


def gaps(c, ids):
    """For jobs run one after another: each one's creation after the previous one's end (the
    time nothing ran: the CLI, the RPCs, the sweep's tick), in seconds."""
    jobs = sorted((c.status(i) for i in ids), key=created_s)
    return [created_s(b) - ended_s(a) for a, b in zip(jobs, jobs[1:])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-steps", type=int, default=100)
    ap.add_argument("--max-parallel", type=int, default=3)
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build/bin"))
    args = ap.parse_args()
    os.environ["CONVOY_BIN_DIR"] = args.bin_dir
    import cluster  # after CONVOY_BIN_DIR: it reads it at import

    c = cluster.Cluster(workers=1, slots=3)
    try:
        spec = base_spec(args.max_steps)
        path = os.path.join(c.dir, "spec.json")
        with open(path, "w") as f:
            json.dump(spec, f)

        # One by one: a shell loop of submit --watch.
        t0 = time.time()
        for lr in LRS:
            r = c.cli("submit", path, "--set", f"trainer.lr={lr}", "--watch", "--output", "json",
                      timeout=600, check=False)
            first = json.loads(r.stdout.splitlines()[0])
            c.jobs.append(first["job_id"])
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        one_by_one = time.time() - t0

        # All at once: three submits, then wait for them all.
        t0 = time.time()
        ids = []
        for lr in LRS:
            r = c.cli("submit", path, "--set", f"trainer.lr={lr}", "--output", "json")
            ids.append(json.loads(r.stdout)["job_id"])
            c.jobs.append(ids[-1])
        for i in ids:
            c.wait_state(i, "SUCCEEDED", timeout=600)
        at_once = max(ended_s(c.status(i)) for i in ids) - t0

        # The sweep.
        sweep = dict(spec, sweep={"parameters": {"trainer.lr": LRS}, "metric": "test_accuracy",
                                  "goal": "max", "max_parallel": args.max_parallel})
        with open(path, "w") as f:
            json.dump(sweep, f)
        t0 = time.time()
        r = c.cli("submit", path, "--output", "json")
        sweep_id = json.loads(r.stdout)["job_id"]
        c.jobs.append(sweep_id)
        c.wait_state(sweep_id, "SUCCEEDED", timeout=600)
        swept = ended_s(c.status(sweep_id)) - t0
        trial_ids = [t["job_id"] for t in c.status(sweep_id)["sweep"]["trials"]]
        loop_ids = c.jobs[:3]

        print(f"3 trials of the Fashion-MNIST CNN, 1x1, max_steps {args.max_steps}, "
              f"lr {', '.join(LRS)}; one worker with 3 slots")
        print(f"{'how':<34}{'wall s':>8}{'vs sweep':>10}")
        for name, secs in ((f"sweep (max_parallel {args.max_parallel})", swept),
                           ("one by one (submit --watch loop)", one_by_one),
                           ("all at once (3 submits)", at_once)):
            print(f"{name:<34}{secs:>8.1f}{secs / swept:>9.2f}x")
        if args.max_parallel == 1:
            fmt = lambda g: ", ".join(f"{x * 1000:.0f}" for x in g)  # noqa: E731
            print(f"between one trial's end and the next one's creation (ms): sweep "
                  f"{fmt(gaps(c, trial_ids))}; submit --watch loop {fmt(gaps(c, loop_ids))}")
        print()
        print(f"$ convoy status {sweep_id}")
        print(c.cli("status", sweep_id).stdout)
        print("$ convoy list")
        print(c.cli("list").stdout)
    finally:
        c.close()


if __name__ == "__main__":
    main()

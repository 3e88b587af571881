"""Submit -> first step of the Python example (examples/python/train_ddp.py, 2 nodes x 1
process, shipped with --code), its ranks started cold or forked from the warm Python
(convoy-worker --warm-python, issue 17). Not a test.

Each run starts a fresh coordinator and two workers on loopback (with --warm-python
/usr/bin/python3 for "warm", without for "cold", which is what a worker does by default), waits
for them (and their forkservers) to be ready, submits the job with the real CLI and times:
  submit -> RUNNING      the CLI's start to the job's RUNNING event (every rank started:
                         code fetched and unpacked, placement, port, fork/exec or fork)
  RUNNING -> first step  the later rank's first optimiser step (the time the worker
                         received its first metric record, from `convoy plot -o csv`)
Runs alternate cold and warm; medians over --repeats.

  bench/python_start.py [--repeats 5] [--bin-dir DIR]
"""

import argparse
import csv
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
EXAMPLES = os.path.join(ROOT, "examples/python")
PY = "/usr/bin/python3"


def event_time(job, to):
    for e in job.get("events", []):
        if e.get("to") == to:
            return int(e["time_unix_ms"]) / 1000.0
    return None


def once(cluster, warm, code_dir):
    c = cluster.Cluster(workers=2, worker_extra=["--warm-python", PY] if warm else [])
    try:
        if warm:
            cluster.wait_for(lambda: all(re.search(r"warm Python( for \S+)? ready", c.logs_of(w))
                                         for w in ("w1", "w2")), 60, "the warm Pythons")
        spec = {"name": "py", "nodes": 2, "procs_per_node": 1, "max_restarts": 0,
                "command": ["python3", "train_ddp.py", "--max-steps", "100000",
                            "--batch-size", "32"],
                "env": {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}}
        spec_path = os.path.join(c.dir, "spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVOY_")}
        env["HOME"] = c.dir
        t0 = time.time()
        r = subprocess.run([os.path.join(cluster.BIN, "convoy"), "--coordinator", c.target,
                            "submit", spec_path, "--code", code_dir, "--output", "json"],
                           capture_output=True, text=True, env=env, check=True)
        job_id = json.loads(r.stdout)["job_id"]
        c.jobs.append(job_id)

        def both_stepped():
            latest = c.status(job_id).get("latest", [])
            return len([m for m in latest if int(m.get("step", 0)) >= 1]) == 2
        cluster.wait_for(both_stepped, 180, "both ranks' first step", interval=0.05)
        job = c.status(job_id)
        plot = c.cli("plot", job_id, "--output", "csv").stdout
        first = {}
        for row in csv.DictReader(io.StringIO(plot)):
            if int(row["step"]) == 1:
                t = int(row["time_unix_ms"]) / 1000.0
                first[row["rank"]] = min(first.get(row["rank"], t), t)
        assert len(first) == 2, plot[:500]
        first_step = max(first.values())
        running = event_time(job, "RUNNING")
        c.cli("cancel", job_id)
        c.wait_state(job_id, "CANCELLED", timeout=60)
        return {"submit -> RUNNING": running - t0, "RUNNING -> first step": first_step - running,
                "TOTAL submit -> first step": first_step - t0}
    finally:
        c.close()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--bin-dir", default=os.path.join(ROOT, "build/bin"))
    args = p.parse_args()
    os.environ["CONVOY_BIN_DIR"] = os.path.abspath(args.bin_dir)
    import cluster  # reads CONVOY_BIN_DIR at import

    code_dir = tempfile.mkdtemp(prefix="python-start-")
    for f in ("train_ddp.py", "convoy_metrics.py"):
        shutil.copy(os.path.join(EXAMPLES, f), code_dir)
    runs = {"cold": [], "warm": []}
    try:
        for i in range(args.repeats):
            for mode in ("cold", "warm"):
                parts = once(cluster, mode == "warm", code_dir)
                runs[mode].append(parts)
                print(f"{mode} {i + 1}/{args.repeats}: " +
                      ", ".join(f"{k} {v:.2f} s" for k, v in parts.items()), flush=True)
    finally:
        shutil.rmtree(code_dir, ignore_errors=True)
    print(f"\nmedian of {args.repeats} (s) | cold | warm | warm/cold")
    for key in runs["cold"][0]:
        cold = statistics.median(r[key] for r in runs["cold"])
        warm = statistics.median(r[key] for r in runs["warm"])
        print(f"{key} | {cold:.2f} | {warm:.2f} | {warm / cold:.2f}")
    for mode in ("cold", "warm"):
        totals = sorted(r["TOTAL submit -> first step"] for r in runs[mode])
        print(f"{mode} totals: " + ", ".join(f"{t:.2f}" for t in totals))


if __name__ == "__main__":
    main()

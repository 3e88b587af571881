#!/usr/bin/env python3
"""TLS against plain text, side by side in one run (issue 12's benchmark): two clusters on
this machine, one secure (TLS, mutual TLS for the workers, bearer tokens), one --insecure,
each with 2 workers. For each, in alternation:
  - submit -> first step and the wall time of a 2-rank convoy-trainer job of --steps steps;
  - --calls `convoy list` invocations from --clients concurrent clients (each a real CLI
    process: connect, handshake, one call), p50/p99 latency.
Prints the figures and the ratios TLS / plain. Asserts nothing.

Usage: bench/tls.py [--steps 300] [--calls 1000] [--clients 20]"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/e2e"))
os.environ.setdefault("CONVOY_BIN_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "../build/bin"))
from cluster import BIN, Cluster, trainer_spec  # noqa: E402


def job_run(c, steps):
    t0 = time.time()
    job = c.submit(trainer_spec(name=f"bench-{steps}", max_steps=steps))
    first = None
    while True:
        s = c.status(job)
        if first is None and any(int(r.get("step", 0)) >= 1 for r in s.get("latest", [])):
            first = time.time() - t0
        if s["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    assert s["state"] == "SUCCEEDED", s.get("message")
    return first if first is not None else float("nan"), time.time() - t0


def list_calls(c, calls, clients):
    creds = ["--ca", c.ca_path(), "--token", c.token] if c.secure else []
    argv = [os.path.join(BIN, "convoy"), "--coordinator", c.target, *creds, "list"]
    env = {"HOME": c.dir, "PATH": os.environ.get("PATH", "/usr/bin")}

    def one(_):
        t = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        return (time.perf_counter() - t) * 1000

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        ms = sorted(pool.map(one, range(calls)))
    return statistics.median(ms), ms[int(len(ms) * 0.99) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    clusters = {"tls": Cluster(workers=2, secure=True), "plain": Cluster(workers=2)}
    res = {k: {"first": [], "wall": [], "p50": [], "p99": []} for k in clusters}
    try:
        for _ in range(a.repeats):
            for name, c in clusters.items():
                first, wall = job_run(c, a.steps)
                res[name]["first"].append(first)
                res[name]["wall"].append(wall)
            for name, c in clusters.items():
                p50, p99 = list_calls(c, a.calls, a.clients)
                res[name]["p50"].append(p50)
                res[name]["p99"].append(p99)
    finally:
        for c in clusters.values():
            c.close()
    med = {k: {m: statistics.median(v) for m, v in r.items()} for k, r in res.items()}
    print(f"{'':34} {'tls':>9} {'plain':>9} {'ratio':>7}")
    for m, label in (("first", f"submit -> first step (s)"),
                     ("wall", f"{a.steps}-step 2-rank job wall (s)"),
                     ("p50", f"convoy list p50 (ms), {a.clients} clients"),
                     ("p99", f"convoy list p99 (ms), {a.clients} clients")):
        t, p = med["tls"][m], med["plain"][m]
        print(f"{label:34} {t:9.2f} {p:9.2f} {t / p:7.3f}")
    print(json.dumps(med))


if __name__ == "__main__":
    main()

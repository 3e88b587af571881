#!/usr/bin/env python3
"""bench/failover.py: coordinators on etcd, a leader killed again and again (issue 30).

For each N in --workers: three etcd members and three convoy-coordinators (--store etcd://,
plain text on loopback, as the simulated workers speak it) on this machine, and N simulated workers
(convoy-sim-workers, one gRPC connection each) given all three coordinators. Then:
  - submit latency, p50/p99 of --submits, on etcd and, side by side in the same run with the
    same N workers, on one coordinator with SQLite (the default store): SubmitJob over one
    connected channel (convoy-bench-submit: the coordinator answers once the job is
    committed), --settle seconds after the N workers registered, and on etcd also right
    after they registered (the leader is still committing their N records, and submits
    queue behind them); and through the real CLI (`convoy submit`: a process start and a
    dial each, on this 2-core machine shared with N simulated workers);
  - the leader's CPU (% of one core) over a --window of heartbeats, RSS and threads;
  - --kills times: kill -9 of the leader, then seconds until a coordinator serves
    (`convoy list` answers) and until all N workers are registered again; the killed
    coordinator is restarted (a follower) and every job acknowledged before the kill must be
    listed (lost writes are counted), and a few more are submitted before the next kill.
Prints a table with the goals: failover < 5 s to a serving leader, < 15 s to all workers
back, no acknowledged write lost, submit p99 < 50 ms on loopback etcd. Everything it starts
is killed on exit; its temp dirs are removed (--keep keeps their logs).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from etcd_members import EtcdMembers, free_port  # noqa: E402
from scale import Generator, pct, proc_stat  # noqa: E402


class Cluster:
    def __init__(self, args, n, store):
        self.args = args
        self.n = n
        self.dir = tempfile.mkdtemp(prefix=f"convoy-failover-{n}-")
        self.etcd = EtcdMembers(self.dir) if store == "etcd" else None
        names = ["c1", "c2", "c3"] if store == "etcd" else ["c1"]
        self.ports = {name: free_port() for name in names}
        self.coords = {}
        self.target = ",".join(f"127.0.0.1:{p}" for p in self.ports.values())
        self.gen = None
        self.acked = []
        for name in names:
            self.start(name)

    def start(self, name):
        log = open(os.path.join(self.dir, name + ".log"), "a")
        store = ["--store", self.etcd.url()] if self.etcd else []
        self.coords[name] = subprocess.Popen(
            [os.path.join(self.args.bin_dir, "convoy-coordinator"), "--listen",
             f"127.0.0.1:{self.ports[name]}", "--state-dir", os.path.join(self.dir, name),
             "--insecure", "--log-level", "warn", *store], stdout=log, stderr=log)

    def convoy(self, *argv, timeout=30):
        return subprocess.run([os.path.join(self.args.bin_dir, "convoy"), "--coordinator",
                               self.target, *argv], capture_output=True, text=True,
                              timeout=timeout)

    def leader(self):
        if not self.etcd:
            return "c1"
        value = self.etcd.get("/convoy/leader")
        for name, port in self.ports.items():
            if value == f"127.0.0.1:{port}" and self.coords[name].poll() is None:
                return name
        return None

    def wait(self, pred, timeout, step=0.05):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return True
            time.sleep(step)
        return pred()

    def serving(self):
        return self.convoy("list", "--output", "json", timeout=10).returncode == 0

    def submit(self, name):
        spec = os.path.join(self.dir, "spec.json")
        with open(spec, "w") as f:
            json.dump({"name": name, "nodes": 1, "procs_per_node": 1, "command": ["true"]}, f)
        t = time.time()
        r = self.convoy("submit", spec, "--output", "json")
        took = time.time() - t
        if r.returncode == 0:
            self.acked.append(json.loads(r.stdout)["job_id"])
        return took, r.returncode == 0

    def listed(self):
        r = self.convoy("list", "--output", "json", timeout=60)
        return {j["id"] for j in json.loads(r.stdout).get("jobs", [])} if r.returncode == 0 \
            else set()

    def close(self):
        if self.gen:
            self.gen.stop()
        for p in self.coords.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.etcd:
            self.etcd.close()
        if not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def submit_latency(c, count):
    """SubmitJob over one connected channel (convoy-bench-submit): p50/p99 ms."""
    r = subprocess.run([os.path.join(c.args.bin_dir, "convoy-bench-submit"), c.target,
                        str(count)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"convoy-bench-submit: {r.stderr.strip()[-500:]}")
    out = json.loads(r.stdout)
    return out["p50_ms"], out["p99_ms"]


def cli_submit_latency(c, count):
    """`convoy submit` as a person runs it (process start and dial included): p50/p99 ms."""
    times = [c.submit(f"lat-{i}")[0] * 1000 for i in range(count)]
    return round(pct(times, 50), 1), round(pct(times, 99), 1)


def connect_workers(c, args, n):
    c.gen = Generator(args.bin_dir, ("ipv4:" if c.etcd else "") + c.target, n,
                      os.path.join(c.dir, "gen.log"))
    if not c.wait(lambda: c.gen.get("registered_now") >= n, args.register_timeout, 0.1):
        raise RuntimeError(f"only {c.gen.get('registered_now')} of {n} registered")


def run(args, n):
    row = {"workers": n}
    failures = []
    sqlite = Cluster(args, n, "sqlite")
    try:
        sqlite.wait(sqlite.serving, 30)
        connect_workers(sqlite, args, n)
        time.sleep(args.settle)
        row["submit_sqlite_p50_ms"], row["submit_sqlite_p99_ms"] = \
            submit_latency(sqlite, args.submits)
        row["cli_submit_sqlite_p50_ms"], row["cli_submit_sqlite_p99_ms"] = \
            cli_submit_latency(sqlite, args.submits)
    finally:
        sqlite.close()
    c = Cluster(args, n, "etcd")
    try:
        if not c.wait(lambda: c.leader() is not None and c.serving(), 60, 0.2):
            raise RuntimeError("no coordinator leads")
        connect_workers(c, args, n)
        # Right after N registered, the leader is still committing their N worker records
        # (batches of 128 operations): submits queue behind them. Then at steady state.
        row["submit_etcd_storm_p50_ms"], row["submit_etcd_storm_p99_ms"] = \
            submit_latency(c, max(5, args.submits // 5))
        time.sleep(args.settle)
        row["submit_etcd_p50_ms"], row["submit_etcd_p99_ms"] = submit_latency(c, args.submits)
        row["cli_submit_etcd_p50_ms"], row["cli_submit_etcd_p99_ms"] = \
            cli_submit_latency(c, args.submits)
        leader = c.leader()
        pid = c.coords[leader].pid
        cpu0, _, _ = proc_stat(pid)
        time.sleep(args.window)
        cpu1, rss, threads = proc_stat(pid)
        row["leader_cpu_pct"] = round((cpu1 - cpu0) / args.window * 100, 1)
        row["leader_rss_mib"] = round(rss)
        row["leader_threads"] = threads
        serving, back, lost = [], [], 0
        for k in range(args.kills):
            leader = c.leader()
            acked = set(c.acked)
            regs0 = c.gen.get("registrations")
            t0 = time.time()
            c.coords[leader].kill()
            c.coords[leader].wait()
            if c.wait(lambda: c.leader() not in (None, leader) and c.serving(), 60):
                serving.append(time.time() - t0)
            else:
                failures.append(f"kill {k + 1}: no coordinator served within 60 s")
                break
            # Back: N registrations since the kill (each worker's own), all of them standing.
            if c.wait(lambda: c.gen.get("registrations") - regs0 >= n and
                      c.gen.get("registered_now") >= n, args.register_timeout, 0.1):
                back.append(time.time() - t0)
            else:
                failures.append(f"kill {k + 1}: {c.gen.get('registered_now')} of {n} back")
            missing = acked - c.listed()
            lost += len(missing)
            if missing:
                failures.append(f"kill {k + 1}: acknowledged jobs lost: {sorted(missing)[:5]}")
            c.start(leader)  # back as a follower
            for i in range(3):
                c.submit(f"after-kill-{k}-{i}")
        row["kills"] = len(serving)
        row["failover_serving_s"] = [round(min(serving), 2), round(pct(serving, 50), 2),
                                     round(max(serving), 2)] if serving else None
        row["failover_all_back_s"] = [round(min(back), 2), round(pct(back, 50), 2),
                                      round(max(back), 2)] if back else None
        row["acked_jobs"] = len(c.acked)
        row["lost"] = lost
    finally:
        c.close()
    row["failures"] = failures
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workers", default="1000,10000")
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--submits", type=int, default=50)
    p.add_argument("--window", type=float, default=10)
    p.add_argument("--settle", type=float, default=10,
                   help="seconds after all workers registered before the steady submits")
    p.add_argument("--register-timeout", type=float, default=120)
    p.add_argument("--bin-dir", default=os.path.join(HERE, "..", "build", "bin"))
    p.add_argument("--json", action="store_true")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    rows = []
    for n in [int(x) for x in args.workers.split(",")]:
        rows.append(run(args, n))
        if args.json:
            print(json.dumps(rows[-1]), flush=True)
    print(f"{'workers':>8} {'serving s (min/p50/max)':>24} {'all back s (min/p50/max)':>25} "
          f"{'kills':>5} {'lost':>4} {'submit p50/p99 ms etcd':>23} {'sqlite':>12} "
          f"{'etcd, just registered':>22} {'CLI etcd':>12} {'CLI sqlite':>12} "
          f"{'leader CPU %':>12}")
    for r in rows:
        print(f"{r['workers']:>8} {str(r.get('failover_serving_s')):>24} "
              f"{str(r.get('failover_all_back_s')):>25} {r.get('kills', 0):>5} "
              f"{r.get('lost', '-'):>4} "
              f"{str(r.get('submit_etcd_p50_ms')) + '/' + str(r.get('submit_etcd_p99_ms')):>23} "
              f"{str(r.get('submit_sqlite_p50_ms')) + '/' + str(r.get('submit_sqlite_p99_ms')):>12} "
              f"{str(r.get('submit_etcd_storm_p50_ms')) + '/' + str(r.get('submit_etcd_storm_p99_ms')):>22} "
              f"{str(r.get('cli_submit_etcd_p50_ms')) + '/' + str(r.get('cli_submit_etcd_p99_ms')):>12} "
              f"{str(r.get('cli_submit_sqlite_p50_ms')) + '/' + str(r.get('cli_submit_sqlite_p99_ms')):>12} "
              f"{r.get('leader_cpu_pct', '-'):>12}")
        for f in r["failures"]:
            print(f"  FAILED: {f}")
    print("goals: serving < 5 s, all workers back < 15 s, nothing acknowledged lost, "
          "submit p99 < 50 ms on etcd")
    return 1 if any(r["failures"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

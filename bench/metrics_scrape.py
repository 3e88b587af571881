#!/usr/bin/env python3
"""The coordinator's /metrics at scale: scrape size and time with N simulated ranks each
reporting a metric record every 100 ms, and the coordinator's CPU for the metric path.

For each N (default 64 and 1024) it starts a coordinator (--insecure, loopback,
--metrics-listen) and convoy-sim-workers with N one-slot workers, submits one N-node job
whose simulated ranks run until the end, then measures over --window seconds each:
  1. records off (SIM_METRICS_MS=0 job): the coordinator's CPU with N idle ranks (heartbeats);
  2. records on (a second, identical job with SIM_METRICS_MS=100): CPU again; the difference
     is the metric path (receive, merge, export) at N x 10 records/s;
  3. /metrics scraped --scrapes times back to back while records flow: size (bytes, series)
     and time (p50, p90, max).
Not a test: prints a table (and --json). Usage:
  python3 bench/metrics_scrape.py [--ranks 64 1024] [--bin-dir build/bin]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values, q):
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(q / 100 * (len(values) - 1)))))
    return values[k]


class Run:
    def __init__(self, args, n):
        self.args, self.n = args, n
        self.dir = tempfile.mkdtemp(prefix=f"convoy-metrics-{n}-")
        self.port, self.mport = free_port(), free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.procs = []
        self.sim_stats = {}

    def spawn(self, name, argv, **kw):
        log = open(os.path.join(self.dir, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=kw.pop("stdout", log), stderr=log, **kw)
        self.procs.append(p)
        return p

    def convoy(self, *argv):
        r = subprocess.run([os.path.join(self.args.bin_dir, "convoy"), "--coordinator",
                            self.target, *argv], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"convoy {argv}: {r.stderr.strip()}")
        return r.stdout

    def submit(self, name, metrics_ms):
        spec = {"name": name, "nodes": self.n, "procs_per_node": 1, "command": ["sim"],
                "env": {"SIM_RUN_MS": "3600000", "SIM_METRICS_MS": str(metrics_ms)}}
        path = os.path.join(self.dir, name + ".json")
        with open(path, "w") as f:
            json.dump(spec, f)
        return json.loads(self.convoy("submit", path, "--output", "json"))["job_id"]

    def state(self, job):
        return json.loads(self.convoy("status", job, "--output", "json"))["state"]

    def scrape(self):
        t = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.mport}/metrics", timeout=30) as r:
            body = r.read()
        return time.perf_counter() - t, body

    def wait(self, pred, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}")

    def cpu_over(self, seconds):
        c0, t0 = cpu_seconds(self.coord.pid), time.time()
        time.sleep(seconds)
        return (cpu_seconds(self.coord.pid) - c0) / (time.time() - t0)

    def go(self):
        a = self.args
        self.coord = self.spawn("coordinator", [
            os.path.join(a.bin_dir, "convoy-coordinator"), "--listen", self.target,
            "--state-dir", os.path.join(self.dir, "state"), "--insecure", "--log-level", "warn",
            "--metrics-listen", f"127.0.0.1:{self.mport}"])
        self.wait(lambda: self._listening(), 20, "the coordinator")
        sim = self.spawn("sim", [os.path.join(a.bin_dir, "convoy-sim-workers"), "--coordinator",
                                 self.target, "--workers", str(self.n), "--duration-s", "3600"],
                         stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read_sim, args=(sim,), daemon=True).start()
        self.wait(lambda: self.sim_stats.get("registered_now", 0) >= self.n, 120,
                  f"{self.n} simulated workers")
        # 1. Ranks running, no records.
        quiet = self.submit("quiet", 0)
        self.wait(lambda: self.state(quiet) == "RUNNING", 120, "the quiet job RUNNING")
        time.sleep(2)
        cpu_off = self.cpu_over(a.window)
        self.convoy("cancel", quiet)
        self.wait(lambda: self.state(quiet) == "CANCELLED", 60, "the quiet job cancelled")
        # 2. Same ranks, a record each every 100 ms.
        job = self.submit("reporting", 100)
        self.wait(lambda: self.state(job) == "RUNNING", 120, "the reporting job RUNNING")
        self.wait(lambda: self.scrape()[1].count(b"convoy_rank_step{") >= self.n, 60,
                  "every rank on /metrics")
        sent0 = self.sim_stats.get("records_sent", 0)
        t0 = time.time()
        cpu_on = self.cpu_over(a.window)
        rate = (self.sim_stats.get("records_sent", 0) - sent0) / (time.time() - t0)
        # 3. Scrapes while records flow.
        times, sizes, series = [], [], 0
        for _ in range(a.scrapes):
            dt, body = self.scrape()
            times.append(dt)
            sizes.append(len(body))
            series = sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))
        return {
            "ranks": self.n,
            "records_per_s": round(rate),
            "scrape_bytes": max(sizes),
            "series": series,
            "scrape_p50_ms": round(pct(times, 50) * 1000, 2),
            "scrape_p90_ms": round(pct(times, 90) * 1000, 2),
            "scrape_max_ms": round(max(times) * 1000, 2),
            "coord_cpu_idle_pct": round(cpu_off * 100, 1),
            "coord_cpu_reporting_pct": round(cpu_on * 100, 1),
            "metric_path_cpu_pct": round((cpu_on - cpu_off) * 100, 1),
        }

    def _listening(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def _read_sim(self, proc):
        for line in proc.stdout:
            try:
                self.sim_stats = json.loads(line)
            except ValueError:
                pass

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[64, 1024])
    p.add_argument("--bin-dir", default=os.path.join(HERE, "..", "build", "bin"))
    p.add_argument("--window", type=float, default=10.0, help="seconds per CPU measurement")
    p.add_argument("--scrapes", type=int, default=20)
    p.add_argument("--keep", action="store_true", help="keep the temp dirs and logs")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = []
    for n in args.ranks:
        run = Run(args, n)
        try:
            rows.append(run.go())
        finally:
            run.stop()
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    cols = ["ranks", "records_per_s", "series", "scrape_bytes", "scrape_p50_ms", "scrape_p90_ms",
            "scrape_max_ms", "coord_cpu_idle_pct", "coord_cpu_reporting_pct",
            "metric_path_cpu_pct"]
    print(" | ".join(cols))
    print(" | ".join("---" for _ in cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/scale.py: one real convoy-coordinator against N simulated workers.

For each N in --workers it starts `convoy-coordinator` (plain text on loopback) and
`convoy-sim-workers` (N workers in one process, each on its own gRPC connection, registering
and heartbeating like convoy-worker) and measures:
  - registration: seconds from the generator's start until all N are registered; refused ones
  - the coordinator's CPU (% of one core over a steady window of heartbeats), RSS and
    threads, with the generator's own CPU beside it (on 2 cores it can be the bottleneck)
  - `convoy workers` and `convoy list` (the real CLI, --output json): p50 / p99 latency
  - a `command: ["true"]` job with nodes N: submit -> every launch received, -> SUCCEEDED
  - kill -9 of the coordinator while an N-node job runs, restart on the same state: seconds
    until all N are registered again, and whether the job carried on (RUNNING, no restart,
    then SUCCEEDED)
Everything is bounded in time; every process it starts is killed on exit.

--check (CI): exits non-zero unless every worker registered with none refused, no stream
was dropped outside the restart, the job SUCCEEDED, and the restart converged with the job
intact. Prints `N passed, M failed`.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_stat(pid):
    """(cpu seconds, rss MiB, threads) of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return cpu, rss, threads


def stop_coordinator(coord, keep, d):
    """SIGTERM (SIGKILL after 10 s) the coordinator `coord`, then remove `d` unless `keep`."""
    if coord.poll() is None:
        coord.send_signal(signal.SIGTERM)
        try:
            coord.wait(10)
        except subprocess.TimeoutExpired:
            coord.kill()
            coord.wait()
    if not keep:
        shutil.rmtree(d, ignore_errors=True)


def wait_listening(port, timeout=20):
    """True once something accepts connections on 127.0.0.1:`port` (within `timeout` s)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def pct(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, int(round(q / 100 * (len(values) - 1)))))
    return values[k]


class Generator:
    """convoy-sim-workers, with its latest stats line kept."""

    def __init__(self, bin_dir, target, workers, log_path):
        self.stats = {}
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [os.path.join(bin_dir, "convoy-sim-workers"), "--coordinator", target,
             "--workers", str(workers), "--duration-s", "1800"],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.stats = json.loads(line)
            except ValueError:
                pass

    def get(self, key):
        return self.stats.get(key, 0)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Run:
    def __init__(self, args, n):
        self.args = args
        self.n = n
        self.dir = tempfile.mkdtemp(prefix=f"convoy-scale-{n}-")
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.coord = None
        self.gen = None
        self.row = {"workers": n}
        self.failures = []

    def convoy(self, *argv, timeout=30):
        return subprocess.run(
            [os.path.join(self.args.bin_dir, "convoy"), "--coordinator", self.target, *argv],
            capture_output=True, text=True, timeout=timeout)

    def start_coordinator(self):
        log = open(os.path.join(self.dir, "coordinator.log"), "a")
        self.coord = subprocess.Popen(
            [os.path.join(self.args.bin_dir, "convoy-coordinator"), "--listen", self.target,
             "--state-dir", os.path.join(self.dir, "state"), "--insecure",
             "--log-level", "warn"], stdout=log, stderr=log)
        if not wait_listening(self.port):
            raise RuntimeError("the coordinator did not start listening")

    def wait(self, pred, timeout, step=0.1):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return True
            time.sleep(step)
        return pred()

    def job_state(self, job_id):
        r = self.convoy("status", job_id, "--output", "json")
        if r.returncode != 0:
            return None, None
        job = json.loads(r.stdout)
        return job.get("state"), job

    def submit(self, name, env=None):
        spec = {"name": name, "nodes": self.n, "procs_per_node": 1, "command": ["true"]}
        if env:
            spec["env"] = env
        path = os.path.join(self.dir, f"{name}.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        t = time.time()
        r = self.convoy("submit", path, "--output", "json", timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"submit failed: {r.stderr.strip()}")
        out = r.stdout.strip().splitlines()[0]
        try:
            obj = json.loads(out)
            job_id = obj.get("job_id") or obj.get("jobId")
        except ValueError:
            job_id = out.split()[-1]
        return job_id, t

    def go(self):
        a = self.args
        try:
            self.start_coordinator()
            t0 = time.time()
            self.gen = Generator(a.bin_dir, self.target, self.n, os.path.join(self.dir, "sim.log"))
            ok = self.wait(lambda: self.gen.get("registered_now") >= self.n, a.register_timeout)
            last = self.gen.get("last_register_unix_ms") / 1000
            self.row["registered_s"] = round(last - t0, 2) if ok else None
            self.row["registered"] = self.gen.get("registered_now")
            self.row["refused"] = self.gen.get("refused")
            if not ok:
                self.failures.append(f"only {self.gen.get('registered_now')} of {self.n} registered")

            # Steady state: heartbeats only.
            c0, _, _ = proc_stat(self.coord.pid)
            g0 = self.gen.get("cpu_s")
            time.sleep(a.window)
            c1, rss, threads = proc_stat(self.coord.pid)
            g1 = self.gen.get("cpu_s")
            self.row["coord_cpu_pct"] = round((c1 - c0) * 100 / a.window, 1)
            self.row["gen_cpu_pct"] = round((g1 - g0) * 100 / a.window, 1)
            self.row["coord_rss_mib"] = round(rss)
            self.row["coord_threads"] = threads
            self.row["gen_threads"] = self.gen.get("threads")

            for verb in ("workers", "list"):
                times, errors = [], 0
                for _ in range(a.calls):
                    t = time.time()
                    r = self.convoy(verb, "--output", "json")
                    times.append((time.time() - t) * 1000)
                    errors += r.returncode != 0
                self.row[f"{verb}_p50_ms"] = round(pct(times, 50))
                self.row[f"{verb}_p99_ms"] = round(pct(times, 99))
                if errors:
                    self.failures.append(f"convoy {verb} failed {errors} of {a.calls} times")

            # A job on every worker.
            launches0 = self.gen.get("launches")
            job_id, t_submit = self.submit("scale")
            launched = self.wait(lambda: self.gen.get("launches") - launches0 >= self.n, 120, 0.05)
            self.row["launched_s"] = (round(self.gen.get("last_launch_unix_ms") / 1000 - t_submit, 2)
                                      if launched else None)
            done = self.wait(lambda: self.job_state(job_id)[0] in
                             ("SUCCEEDED", "FAILED", "CANCELLED"), 180, 0.2)
            state, _ = self.job_state(job_id)
            self.row["succeeded_s"] = round(time.time() - t_submit, 2) if state == "SUCCEEDED" else None
            if state != "SUCCEEDED":
                self.failures.append(f"the {self.n}-node job ended {state if done else 'never'}")
            dropped_before = self.gen.get("dropped")
            self.row["dropped"] = dropped_before
            if dropped_before:
                self.failures.append(f"{dropped_before} worker streams dropped")

            if a.restart:
                self.restart_test()
        except Exception as e:  # reported as a failed check, never a crash
            self.failures.append(f"error: {e}")
        finally:
            self.stop()
        self.row["failures"] = self.failures
        return self.row

    def restart_test(self):
        run_ms = self.args.restart_run_s * 1000
        job_id, _ = self.submit("survivor", {"SIM_RUN_MS": str(run_ms)})
        if not self.wait(lambda: self.job_state(job_id)[0] == "RUNNING", 120, 0.2):
            self.failures.append("the restart test's job never ran")
            return
        time.sleep(1)
        self.coord.kill()
        self.coord.wait()
        regs0 = self.gen.get("registrations")
        self.wait(lambda: self.gen.get("registered_now") < self.n, 30, 0.05)
        t = time.time()
        self.start_coordinator()
        back = self.wait(lambda: self.gen.get("registrations") - regs0 >= self.n and
                         self.gen.get("registered_now") >= self.n, self.args.register_timeout, 0.1)
        self.row["restart_reconnect_s"] = round(time.time() - t, 2) if back else None
        if not back:
            self.failures.append(f"after the restart only {self.gen.get('registered_now')} came back")
        state, job = self.job_state(job_id)
        restarts = (job or {}).get("restarts", 0)
        intact = state == "RUNNING" and not restarts
        done = self.wait(lambda: self.job_state(job_id)[0] in
                         ("SUCCEEDED", "FAILED", "CANCELLED"), self.args.restart_run_s + 120, 0.5)
        final, job = self.job_state(job_id)
        intact = intact and final == "SUCCEEDED" and not (job or {}).get("restarts", 0)
        self.row["job_intact"] = intact
        if not intact:
            self.failures.append(f"the running job did not carry on: {state} then {final}, "
                                 f"restarts {restarts}")

    def stop(self):
        if self.gen:
            self.gen.stop()
        if self.coord and self.coord.poll() is None:
            self.coord.send_signal(signal.SIGTERM)
            try:
                self.coord.wait(10)
            except subprocess.TimeoutExpired:
                self.coord.kill()
                self.coord.wait()
        if not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def py_storm(args, n):
    """N workers arriving at once from an asyncio Python client (bench/scale_py_storm.py: a
    channel each, 200 registrations in flight, 100 ms minimum reconnect backoff) against a
    fresh coordinator: seconds until all registered, failed attempts."""
    d = tempfile.mkdtemp(prefix=f"convoy-pystorm-{n}-")
    port = free_port()
    target = f"127.0.0.1:{port}"
    row = {"py_workers": n}
    with open(os.path.join(d, "coordinator.log"), "w") as log:
        coord = subprocess.Popen(
            [os.path.join(args.bin_dir, "convoy-coordinator"), "--listen", target, "--state-dir",
             os.path.join(d, "state"), "--insecure", "--log-level", "warn"], stdout=log, stderr=log)
    try:
        wait_listening(port)
        r = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "scale_py_storm.py"),
                            "--coordinator", target, "--workers", str(n),
                            "--timeout", str(args.register_timeout)],
                           capture_output=True, text=True, timeout=args.register_timeout + 60)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        row.update(py_registered=out["registered"], py_registered_s=out["registered_s"],
                   py_failed_attempts=out["failed_attempts"], py_errors=out["errors"])
    except Exception as e:  # reported, never a crash
        row["py_error"] = str(e)
    finally:
        stop_coordinator(coord, args.keep, d)
    return row


def emfile_check(args):
    """The coordinator under a 300-descriptor limit, 400 workers dialling: it must say it ran
    out, keep serving (`convoy list`), and accept again once the workers are gone."""
    failures = []
    d = tempfile.mkdtemp(prefix="convoy-emfile-")
    port = free_port()
    target = f"127.0.0.1:{port}"
    log_path = os.path.join(d, "coordinator.log")
    with open(log_path, "w") as log:
        coord = subprocess.Popen(
            ["prlimit", "--nofile=300:300", os.path.join(args.bin_dir, "convoy-coordinator"),
             "--listen", target, "--state-dir", os.path.join(d, "state"), "--insecure"],
            stdout=log, stderr=log)
    gen = None
    try:
        time.sleep(0.5)
        gen = Generator(args.bin_dir, target, 400, os.path.join(d, "sim.log"))
        deadline = time.time() + 30
        while time.time() < deadline and "out of file descriptors" not in open(log_path).read():
            time.sleep(0.2)
        if "out of file descriptors" not in open(log_path).read():
            failures.append("the coordinator never said it ran out of descriptors")
        cli = lambda: subprocess.run([os.path.join(args.bin_dir, "convoy"), "--coordinator",
                                      target, "list"], capture_output=True, timeout=30)
        if coord.poll() is not None:
            failures.append("the coordinator died when descriptors ran out")
        time.sleep(2)
        if gen.get("registered_now") == 0 or gen.get("dropped") != 0:
            failures.append(f"open streams were not kept: {gen.get('registered_now')} registered, "
                            f"{gen.get('dropped')} dropped while out of descriptors")
        gen.stop()
        gen = None
        deadline = time.time() + 30
        while time.time() < deadline and "accepting connections again" not in open(log_path).read():
            time.sleep(0.2)
        if "accepting connections again" not in open(log_path).read():
            failures.append("the coordinator did not accept again once descriptors were free")
        if cli().returncode != 0:
            failures.append("convoy list failed after the descriptors were free again")
    except Exception as e:
        failures.append(f"error: {e}")
    finally:
        if gen:
            gen.stop()
        stop_coordinator(coord, args.keep, d)
    return failures


COLUMNS = [("workers", "workers"), ("registered_s", "registered in s"), ("refused", "refused"),
           ("coord_cpu_pct", "coord CPU %"), ("gen_cpu_pct", "generator CPU %"),
           ("coord_rss_mib", "coord RSS MiB"), ("coord_threads", "coord threads"),
           ("workers_p50_ms", "workers p50 ms"), ("workers_p99_ms", "workers p99 ms"),
           ("list_p50_ms", "list p50 ms"), ("list_p99_ms", "list p99 ms"),
           ("launched_s", "job launched in s"), ("succeeded_s", "SUCCEEDED in s"),
           ("restart_reconnect_s", "restart: all back in s"), ("job_intact", "job intact")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workers", default="100,1000,3000,10000")
    p.add_argument("--bin-dir", default=os.path.join(HERE, "..", "build", "bin"))
    p.add_argument("--window", type=float, default=10, help="steady-state window, s")
    p.add_argument("--calls", type=int, default=30, help="CLI calls per verb")
    p.add_argument("--register-timeout", type=float, default=90)
    p.add_argument("--no-restart", dest="restart", action="store_false")
    p.add_argument("--restart-run-s", type=int, default=40)
    p.add_argument("--check", action="store_true", help="CI: assert correctness only")
    p.add_argument("--json", action="store_true")
    p.add_argument("--emfile", action="store_true",
                   help="also run the coordinator out of file descriptors (300) with 400 workers")
    p.add_argument("--keep", action="store_true", help="keep the temp dirs (logs)")
    p.add_argument("--py-storm", action="store_true",
                   help="also register each N from an asyncio Python client "
                        "(bench/scale_py_storm.py; needs python3-grpcio)")
    args = p.parse_args()
    if args.check:
        args.window = min(args.window, 3)
        args.calls = min(args.calls, 5)
        args.restart_run_s = min(args.restart_run_s, 15)
    rows = []
    for n in [int(x) for x in args.workers.split(",") if x]:
        print(f"== {n} simulated workers", flush=True)
        row = Run(args, n).go()
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print()
        print("| " + " | ".join(h for _, h in COLUMNS) + " |")
        print("|" + "---|" * len(COLUMNS))
        for r in rows:
            print("| " + " | ".join("never" if r.get(k, "") is None else str(r.get(k, "-"))
                                    for k, _ in COLUMNS) + " |")
        for r in rows:
            if r.get("gen_cpu_pct", 0) >= 85:
                print(f"note: at {r['workers']} workers the generator used {r['gen_cpu_pct']} % "
                      "of a core: it, not the coordinator, may be the bottleneck")
            for f in r["failures"]:
                print(f"{r['workers']} workers: {f}")
    failed = sum(len(r["failures"]) for r in rows)
    if args.py_storm:
        print("\n| workers (asyncio Python client) | registered | in s | failed attempts |")
        print("|---|---|---|---|")
        for n in [int(x) for x in args.workers.split(",") if x]:
            row = py_storm(args, n)
            print(f"| {n} | {row.get('py_registered', '-')} | {row.get('py_registered_s', '-')} "
                  f"| {row.get('py_failed_attempts', row.get('py_error', '-'))} |", flush=True)
    checks = len(rows) * (6 if args.restart else 5)
    if args.emfile:
        print("== out of file descriptors: limit 300, 400 workers", flush=True)
        emfile = emfile_check(args)
        for f in emfile:
            print(f"descriptors: {f}")
        if not emfile:
            print("descriptors: ran out, shed new connections, kept the open ones, accepted again")
        failed += len(emfile)
        checks += 3
    if args.check:
        print(f"{checks - min(failed, checks)} passed, {failed} failed")
    return 1 if (args.check and failed) else 0


if __name__ == "__main__":
    sys.exit(main())

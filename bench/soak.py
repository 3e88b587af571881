#!/usr/bin/env python3
"""bench/soak.py: a secure cluster under a seeded random schedule of faults (issue 26).

A coordinator (TLS, workers joined with a token) and three workers, n1 and n2 each in a
network namespace of its own (veth links to the root namespace, 10.202.x.0/24) and w1 in the
root namespace. For --minutes (30) a schedule drawn from --seed:

  - submits built-in trainer jobs (fmnist-cnn or mlp, 60-200 steps; fixed or elastic sizes,
    some preemptible, priorities -1 to 2) and small Python jobs (bench/soak_job.py);
  - kill -9s ranks, workers and the coordinator, and restarts each daemon after a few seconds;
  - cuts a namespace's link and restores it 2-12 s later;
  - preempts (submits an urgent job of priority 10 while preemptible jobs run) and drains
    (sometimes --now) and undrains workers.

Daemons are killed only in the first 60 % of the run: the last 40 % keeps every other fault,
and measures the daemons' memory and descriptors from a warm-up point to the end.

At the end, with every fault undone and every job finished, it checks:

  - every job SUCCEEDED having trained exactly its steps (its metric history and the summary
    line of its last attempt's rank 0) with no step of an attempt at or before the step its
    log says it resumed from, or FAILED with a cause (the last attempt's failure);
  - every "resumed from PATH" of every rank log is the job's own state (a snapshot under
    CLUSTER_ID-UID, a checkpoint under the job's own directory);
  - no rank process, socket, snapshot or temporary directory is left (while the daemons still
    run, and after teardown);
  - the coordinator's and workers' RSS and open descriptors at the end are within 10 % of
    the same after warm-up (not with --check).

The coordinator runs with --job-retention N (--job-retention, 30): it keeps the newest N
finished jobs and deletes the rest with their files, as a long-running cluster does, so the
memory it holds for jobs stays level. The soak checks each job about 10 s after it finished,
before retention deletes it, and reports how many jobs the coordinator held at each point.

and prints a table: faults injected by kind, jobs by outcome, steps lost per fault (median,
max), leftovers. Exit status 0 when every check passed, 1 otherwise.

  bench/soak [--minutes 30] [--seed 1] [--check] [--no-netns] [--job-retention 30]
             [--json FILE] [--keep]

--check (CI): the correctness checks only (memory is reported, not asserted). Needs root;
without `ip netns` it runs every worker on loopback only with --no-netns (no link cuts).
Not a timed test: it never asserts a duration.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

UNFINISHED = ["PENDING", "SCHEDULED", "RENDEZVOUS", "RUNNING", "RESTARTING"]
# Namespaces, links and addresses of this soak (10.201.x is test_e2e_failures.py's).
# The fault kinds every run has at least once (the short soak's test asserts each); the daemon
# kills only while daemons may die.
REQUIRED_FAULTS = ("kill -9 worker", "kill -9 coordinator", "kill -9 rank", "cut link")
DAEMON_FAULTS = ("kill -9 worker", "kill -9 coordinator")
NETNS = [("cvys-a", "cvysh0", "cvysn0", 0), ("cvys-b", "cvysh1", "cvysn1", 1)]
# A veth pair that stays in the root namespace and is never cut: w1's address, which ranks
# in the namespaces reach through their default route whatever link is down.
W1_LINK, W1_PEER, W1_ADDR = "cvysh9", "cvysn9", "10.202.9.1"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(*argv, check=True):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True)


def netns_works():
    """True when this process may make network namespaces and veth pairs."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    r = subprocess.run(["ip", "netns", "add", "cvys-probe"], capture_output=True)
    subprocess.run(["ip", "netns", "del", "cvys-probe"], capture_output=True)
    return r.returncode == 0


class Network:
    """The soak's namespaces and links; undo() removes all of them and restores ip_forward."""

    def __init__(self):
        self.forward = None
        self.made = []
        for ns, _, _, _ in NETNS:
            if os.path.exists(f"/run/netns/{ns}"):
                raise SystemExit(f"network namespace {ns} exists: another soak runs, or one "
                                 f"was killed (remove it: ip netns del {ns})")
        try:
            for ns, host_if, ns_if, i in NETNS:
                self.made.append(("netns", ns))
                sh("ip", "netns", "add", ns)
                self.made.append(("link", host_if))
                sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
                sh("ip", "link", "set", ns_if, "netns", ns)
                sh("ip", "addr", "add", f"10.202.{i}.1/24", "dev", host_if)
                sh("ip", "link", "set", host_if, "up")
                sh("ip", "-n", ns, "addr", "add", f"10.202.{i}.2/24", "dev", ns_if)
                sh("ip", "-n", ns, "link", "set", ns_if, "up")
                sh("ip", "-n", ns, "link", "set", "lo", "up")
                sh("ip", "-n", ns, "route", "add", "default", "via", f"10.202.{i}.1")
            self.made.append(("link", W1_LINK))
            sh("ip", "link", "add", W1_LINK, "type", "veth", "peer", "name", W1_PEER)
            sh("ip", "addr", "add", f"{W1_ADDR}/32", "dev", W1_LINK)
            sh("ip", "link", "set", W1_LINK, "up")
            sh("ip", "link", "set", W1_PEER, "up")
            with open("/proc/sys/net/ipv4/ip_forward") as f:
                self.forward = f.read().strip()
            with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
                f.write("1")
        except BaseException:
            self.undo()
            raise

    @staticmethod
    def set_link(index, up):
        sh("ip", "link", "set", NETNS[index][1], "up" if up else "down")

    def undo(self):
        if self.forward is not None:
            with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
                f.write(self.forward)
            self.forward = None
        for kind, name in reversed(self.made):
            if kind == "link":
                subprocess.run(["ip", "link", "del", name], capture_output=True)
            else:
                subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self.made = []

    def left(self):
        """Namespaces or links of this soak still on the machine."""
        out = []
        for ns, host_if, _, _ in NETNS:
            if os.path.exists(f"/run/netns/{ns}"):
                out.append(f"network namespace {ns}")
            if os.path.exists(f"/sys/class/net/{host_if}"):
                out.append(f"link {host_if}")
        if os.path.exists(f"/sys/class/net/{W1_LINK}"):
            out.append(f"link {W1_LINK}")
        return out


def make_cluster(use_netns, job_retention):
    from cluster import Cluster

    class SoakCluster(Cluster):
        """The e2e Cluster, its coordinator listening on every address when workers dial it
        from namespaces (its certificate names the addresses they dial)."""

        def start_coordinator(self):
            if not use_netns:
                return super().start_coordinator()
            target = self.target
            self.target = f"0.0.0.0:{self.port}"
            try:
                return super().start_coordinator()
            finally:
                self.target = target

    extra = ["--min-resize-interval", "15", "--preempt-grace", "15",
             "--job-retention", str(job_retention)]
    if use_netns:
        extra += ["--tls-san", "10.202.0.1", "--tls-san", "10.202.1.1"]
    c = SoakCluster(workers=0, secure=True, worker_timeout=5, kill_grace_ms=2000,
                    coordinator_extra=extra)
    # Workers that restart join again: a token with uses to spare.
    c.join_token = c.make_token("worker", uses=1000)
    return c


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.use_netns = not args.no_netns
        self.net = None
        self.c = None
        self.faults = []        # {"t", "kind", "target", ...} in order
        self.pending = []       # (due time, description, fn): undoing a fault
        self.jobs = {}          # job id -> {"kind", "spec", "steps", "urgent"}
        self.samples = []       # (t, name, pid, rss_kb, fds)
        self.held = []          # (t, jobs the coordinator holds)
        self.finished_at = {}   # job id -> when the soak first saw it finished
        self.checked = set()    # jobs check_job has looked at
        import soak_checks
        self.results = soak_checks.new_results(self)
        self.worker_ns = {"w1": None, "n1": 0, "n2": 1}
        self.down = set()       # daemons killed and not restarted yet
        self.cut = set()        # namespace links down
        self.drained = set()
        self.submitted = 0
        self.bag = []
        self.due_at = float("inf")  # run(): from here a required fault not yet done goes first
        self.code_dir = None

    # ---- the cluster
    def worker_argv(self, name):
        c = self.c
        i = self.worker_ns[name]
        if i is None:
            coord, addr, prefix = f"127.0.0.1:{c.port}", W1_ADDR if self.use_netns \
                else "127.0.0.1", []
        else:
            coord, addr = f"10.202.{i}.1:{c.port}", f"10.202.{i}.2"
            prefix = ["ip", "netns", "exec", NETNS[i][0]]
        from cluster import BIN
        return [*prefix, os.path.join(BIN, "convoy-worker"), "--coordinator", coord,
                "--name", name, "--advertise-address", addr, "--slots", "1", "--cores", "1",
                "--work-dir", os.path.join(c.dir, name), "--job-root", c.job_root,
                "--snapshot-dir", c.snapshot_dir(name), "--join-token", c.join_token,
                "--ca-fingerprint", c.fingerprint, "--kill-grace-ms", "2000",
                "--orphan-timeout", "8"]

    def start_worker(self, name):
        self.c._spawn(name, self.worker_argv(name))
        self.down.discard(name)

    def setup(self):
        if self.use_netns:
            self.net = Network()
        self.before_tmp = set(os.listdir("/tmp"))
        self.before_shm = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
        self.c = make_cluster(self.use_netns, self.args.job_retention)
        if not self.use_netns:
            self.worker_ns = {"w1": None, "w2": None, "w3": None}
        for name in self.worker_ns:
            self.start_worker(name)
        self.c.wait_workers_ready(len(self.worker_ns), timeout=60)
        with open(os.path.join(self.c.dir, "state", "cluster-id")) as f:
            self.cluster_id = f.read().strip()
        # The Python job's code: the job and the metrics helper.
        self.code_dir = os.path.join(self.c.dir, "pycode")
        os.makedirs(self.code_dir)
        shutil.copy(os.path.join(ROOT, "bench", "soak_job.py"), self.code_dir)
        shutil.copy(os.path.join(ROOT, "examples", "python", "convoy_metrics.py"), self.code_dir)
        log(f"cluster {self.cluster_id} in {self.c.dir}: coordinator and workers "
            f"{', '.join(self.worker_ns)}" + (" (n1, n2 in network namespaces)"
                                              if self.use_netns else " (all on loopback)"))

    def cli(self, *args, timeout=60):
        """The CLI's answer, or None while the coordinator cannot be reached or refuses."""
        try:
            return self.c.cli(*args, timeout=timeout)
        except (AssertionError, subprocess.TimeoutExpired):
            return None

    def cli_json(self, *args):
        r = self.cli(*args, "--output", "json")
        return None if r is None else json.loads(r.stdout or "{}")

    def unfinished(self):
        r = self.cli_json("list", "--state", ",".join(UNFINISHED))
        return None if r is None else r.get("jobs", [])

    # ---- jobs
    def job_spec(self, urgent=False):
        rng = self.rng
        n = self.submitted
        if urgent:
            steps = rng.randint(60, 100)
            spec = {"name": f"urgent{n}", "nodes": 2, "priority": 10, "preemptible": False}
            kind = "urgent"
        elif rng.random() < 0.3:
            steps = rng.randint(40, 100)
            nodes = rng.choice([1, 1, 2])
            spec = {"name": f"py{n}", "nodes": nodes, "procs_per_node": 1,
                    "command": ["python3", "soak_job.py", str(steps), "0.15"],
                    "max_restarts": 6, "priority": rng.choice([-1, 0, 1]), "hang_timeout": 60,
                    # Debian's python3: the one the ranks' user can run, whatever the PATH
                    # of the person running the soak.
                    "env": {"PATH": "/usr/bin:/bin"}}
            return "python", spec, steps
        else:
            steps = rng.randint(60, 200)
            spec = {"name": f"t{n}", "priority": rng.choice([-1, -1, 0, 0, 1, 2])}
            if rng.random() < 0.3:
                spec.update(min_nodes=1, max_nodes=rng.choice([2, 3]), resize_interval=15)
                kind = "elastic"
            else:
                spec["nodes"] = rng.choice([1, 2, 2, 3])
                kind = "fixed"
            if spec["priority"] >= 0 and rng.random() < 0.3:
                spec["preemptible"] = True
        trainer = {"model": rng.choice(["fmnist-cnn", "mlp"]), "epochs": 1, "batch_size": 32,
                   "lr": 0.01, "max_steps": steps}
        every = rng.choice([None, 25, 50])
        if every:
            trainer["checkpoint_every"] = every
        spec.update(procs_per_node=1, backend="gloo", trainer=trainer, max_restarts=6,
                    hang_timeout=60, env={"OMP_NUM_THREADS": "1"})
        return kind, spec, steps

    def submit(self, urgent=False):
        kind, spec, steps = self.job_spec(urgent)
        self.submitted += 1
        path = os.path.join(self.c.dir, f"spec-{self.submitted}.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        args = ["submit", path]
        if kind == "python":
            args += ["--code", self.code_dir]
        r = self.cli(*args, "--output", "json")
        if r is None:
            return None
        job = json.loads(r.stdout)["job_id"]
        self.c.jobs.append(job)
        self.jobs[job] = {"kind": kind, "spec": spec, "steps": steps}
        log(f"submit {job} {kind} {spec['name']} steps {steps} "
            f"nodes {spec.get('nodes', str(spec.get('min_nodes')) + '-' + str(spec.get('max_nodes')))}"
            f" priority {spec.get('priority')}")
        return job

    # ---- faults
    def record(self, kind, target, **more):
        self.faults.append({"t": time.time(), "kind": kind, "target": target, **more})
        log(f"fault {kind} {target} {more if more else ''}")

    def later(self, delay, what, fn):
        self.pending.append((time.time() + delay, what, fn))

    def running_jobs(self):
        jobs = self.unfinished()
        return None if jobs is None else [j["id"] for j in jobs if j["state"] == "RUNNING"]

    def fault_kill_rank(self):
        running = self.running_jobs()
        if not running:
            return False
        job = self.rng.choice(sorted(running))
        pids = sorted(self.c.job_pids(job))
        if not pids:
            return False
        pid = self.rng.choice(pids)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            return False
        self.record("kill -9 rank", job, pid=pid)
        return True

    def fault_kill_worker(self):
        alive = sorted(w for w in self.worker_ns if w not in self.down)
        if len(alive) < 2:
            return False
        name = self.rng.choice(alive)
        self.c.signal(name, signal.SIGKILL)
        self.down.add(name)
        self.record("kill -9 worker", name)
        self.later(self.rng.uniform(1, 10), f"restart {name}", lambda: self.start_worker(name))
        return True

    def fault_kill_coordinator(self):
        if "coordinator" in self.down:
            return False
        self.c.signal("coordinator", signal.SIGKILL)
        self.down.add("coordinator")
        self.record("kill -9 coordinator", "coordinator")

        def restart():
            self.c.start_coordinator()
            self.down.discard("coordinator")
        self.later(self.rng.uniform(0.5, 4), "restart coordinator", restart)
        return True

    def fault_cut_link(self):
        if not self.use_netns:
            return False
        up = [i for i in range(len(NETNS)) if i not in self.cut]
        if not up:
            return False
        i = self.rng.choice(up)
        Network.set_link(i, False)
        self.cut.add(i)
        seconds = self.rng.uniform(2, 12)
        self.record("cut link", f"n{i + 1}", seconds=round(seconds, 1))

        def restore():
            Network.set_link(i, True)
            self.cut.discard(i)
        self.later(seconds, f"restore link of n{i + 1}", restore)
        return True

    def fault_drain(self):
        if self.drained:
            return False
        name = self.rng.choice(sorted(self.worker_ns))
        now = self.rng.random() < 0.5
        if self.cli("drain", name, *(["--now"] if now else [])) is None:
            return False
        self.drained.add(name)
        self.record("drain --now" if now else "drain", name)

        def undrain():
            if self.cli("undrain", name) is not None:
                self.drained.discard(name)
            else:
                self.later(2, f"undrain {name}", undrain)
        self.later(self.rng.uniform(5, 20), f"undrain {name}", undrain)
        return True

    def fault_preempt(self):
        jobs = self.unfinished()
        if not jobs:
            return False
        def preemptible(job):
            spec = self.jobs.get(job, {}).get("spec", {})
            return spec.get("preemptible", spec.get("priority", 0) < 0)
        victims = [j["id"] for j in jobs if j["state"] == "RUNNING" and preemptible(j["id"])]
        if not victims:
            return False
        job = self.submit(urgent=True)
        if job is None:
            return False
        self.record("preempt (urgent job)", job, running_preemptible=victims)
        return True

    def act(self, daemons_may_die):
        """One step of the schedule: a submission while fewer than 3 jobs are unfinished, else
        a fault drawn by weight (one not possible now counts as a pause)."""
        jobs = self.unfinished()
        if jobs is not None and len(jobs) < 3 and self.rng.random() < 0.7:
            self.submit()
            return
        # Every kind that the short soak's test requires at least once, however few draws a
        # loaded machine leaves time for (a two-minute run draws about ten, and a rank kill
        # drawn while nothing ran goes to the bag's bottom): past half of the window in which
        # daemons may die, one not yet done goes first; a daemon kill only inside that window.
        if time.time() >= self.due_at:
            done = {f["kind"] for f in self.faults}
            by_kind = {"kill -9 worker": self.fault_kill_worker,
                       "kill -9 coordinator": self.fault_kill_coordinator,
                       "kill -9 rank": self.fault_kill_rank, "cut link": self.fault_cut_link}
            for kind in REQUIRED_FAULTS:
                if kind not in done and (daemons_may_die or kind not in DAEMON_FAULTS) and \
                        by_kind[kind]():
                    return
            # And a drain of either kind (the test asks for one): on a machine loaded by other
            # tests a two-minute run has drawn none from the bag.
            if not done & {"drain", "drain --now"} and self.fault_drain():
                return
        # Faults come out of a shuffled bag, refilled when empty, so that even a short run
        # has every kind: by weight, rank kills 3, workers, links and drains 2, preemptions
        # and the coordinator 1.
        if not self.bag:
            self.bag = [self.fault_kill_rank] * 3 + [self.fault_kill_worker] * 2 + \
                [self.fault_cut_link] * 2 + [self.fault_drain] * 2 + [self.fault_preempt] + \
                [self.fault_kill_coordinator]
            self.rng.shuffle(self.bag)
        fault = self.bag.pop()
        if not daemons_may_die and fault in (self.fault_kill_worker,
                                              self.fault_kill_coordinator):
            return
        if not fault():
            self.bag.insert(0, fault)  # not possible now (nothing runs, say): later

    def run_due(self, everything=False):
        now = time.time()
        due = sorted((p for p in self.pending if everything or p[0] <= now), key=lambda p: p[0])
        self.pending = [p for p in self.pending if p not in due]
        for _, what, fn in due:
            log(what)
            fn()

    # ---- memory and descriptors
    def sample(self, t):
        names = ["coordinator", *self.worker_ns]
        for name in names:
            if name in self.down:
                continue
            pid = self.c.procs[name].pid
            try:
                with open(f"/proc/{pid}/status") as f:
                    rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
                fds = len(os.listdir(f"/proc/{pid}/fd"))
            except (OSError, StopIteration):
                continue
            self.samples.append((t, name, pid, rss, fds))
        if "coordinator" not in self.down:
            r = self.cli_json("list")
            if r is not None:
                self.held.append((t, len(r.get("jobs", []))))

    # ---- checking jobs as they finish, before retention deletes them
    def uncordon_cordoned(self):
        """The coordinator cordons a worker whose ranks of two jobs failed for the node's
        reasons (issue 42): the soak's kills and cuts do that on purpose. As an operator
        would once the node is known good, the soak uncordons it (and counts it)."""
        for w in (self.cli_json("workers") or {}).get("workers", []):
            if w.get("cordoned") and w.get("cordoned_by") == "coordinator":
                log(f"uncordon {w['name']}: {w.get('cordon_reason', '')[:120]}")
                self.results.setdefault("auto_cordons", []).append(w["name"])
                self.cli("uncordon", w["name"])

    def check_finished(self, settle_s=10):
        """check_job on every job finished at least `settle_s` ago (its workers have written
        their last log lines), once; a job the coordinator cannot answer for now is tried on
        the next call."""
        import soak_checks
        done = self.cli_json("list", "--state", "SUCCEEDED,FAILED,CANCELLED")
        if done is None:
            return
        now = time.time()
        for j in done.get("jobs", []):
            job = j["id"]
            if job in self.jobs and job not in self.checked:
                self.finished_at.setdefault(job, now)
        for job, t in sorted(self.finished_at.items()):
            if job in self.checked or now - t < settle_s:
                continue
            try:
                soak_checks.check_job(self, job, self.results)
            except (AssertionError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
                log(f"check {job}: not now ({str(e).splitlines()[0][:120] if str(e) else e})")
                continue
            self.checked.add(job)

    # ---- the run
    def run(self):
        start = time.time()
        duration = self.args.minutes * 60
        end = start + duration
        quiet = start + 0.6 * duration   # no daemon is killed after this
        self.due_at = start + 0.3 * duration
        self.warmup_at = quiet + min(120, 0.1 * duration)
        next_act = start + 2
        next_sample = start
        next_check = start + 5
        log(f"soak: {self.args.minutes} min, seed {self.args.seed}; daemons are killed until "
            f"{time.strftime('%H:%M:%S', time.localtime(quiet))}, memory warm-up point "
            f"{time.strftime('%H:%M:%S', time.localtime(self.warmup_at))}")
        while time.time() < end:
            self.run_due()
            now = time.time()
            if now >= next_sample:
                self.sample(now)
                next_sample = now + 10
            if now >= next_check:
                self.check_finished()
                self.uncordon_cordoned()
                next_check = time.time() + 5
            if now >= next_act:
                self.act(daemons_may_die=now < quiet)
                next_act = time.time() + self.rng.uniform(2, 6)
            time.sleep(0.25)
        log("schedule over: undoing every fault")
        self.run_due(everything=True)
        for name in list(self.drained):
            self.cli("undrain", name)
        self.uncordon_cordoned()
        self.c.wait_workers_ready(len(self.worker_ns), timeout=120)
        self.sample(time.time())
        self.end_sample_t = time.time()
        log("waiting for every job to finish")
        deadline = time.time() + self.args.drain_timeout
        while time.time() < deadline:
            jobs = self.unfinished()
            if jobs == []:
                break
            time.sleep(2)
        self.duration_s = time.time() - start


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--check", action="store_true",
                   help="CI: exit 1 on a correctness failure only (memory is reported)")
    p.add_argument("--no-netns", action="store_true",
                   help="every worker on loopback, no link cuts (no root or `ip netns`)")
    p.add_argument("--bin-dir", default=None, help="the binaries (default build/bin)")
    p.add_argument("--drain-timeout", type=float, default=600,
                   help="seconds the jobs have to finish after the schedule")
    p.add_argument("--job-retention", type=int, default=30,
                   help="finished jobs the coordinator keeps (0: every one)")
    p.add_argument("--json", default=None, help="write the results to this file")
    p.add_argument("--keep", action="store_true", help="keep the cluster's directory (logs)")
    args = p.parse_args()
    if args.minutes <= 0:
        p.error("--minutes: must be positive")
    if args.job_retention < 0:
        p.error("--job-retention: must be 0 (keep every job) or a count")
    if args.bin_dir:
        os.environ["CONVOY_BIN_DIR"] = os.path.abspath(args.bin_dir)
    elif "CONVOY_BIN_DIR" not in os.environ:
        os.environ["CONVOY_BIN_DIR"] = os.path.join(ROOT, "build", "bin")
    if not args.no_netns and not netns_works():
        print("bench/soak: network namespaces are not available here (needs root and "
              "`ip netns`); --no-netns runs every worker on loopback", file=sys.stderr)
        return 2
    import soak_checks
    soak = Soak(args)
    results = None
    try:
        soak.setup()
        soak.run()
        results = soak_checks.check_running(soak)
    finally:
        if soak.c is not None:
            if args.keep:
                # Not /tmp/convoy-*: scripts/leftovers.sh would take it for a test's leftover.
                keep = os.path.join(os.path.dirname(soak.c.dir),
                                    "soak-kept-" + os.path.basename(soak.c.dir))
                try:
                    shutil.copytree(soak.c.dir, keep, symlinks=True,
                                    ignore=lambda d, names: [n for n in names if n.endswith(
                                        ".sock") or n in ("data-cache", "code")])
                    log(f"kept a copy of the cluster's directory in {keep}")
                except (OSError, shutil.Error) as e:
                    log(f"could not keep a copy of the cluster's directory: {e}")
            leftovers = soak.c.close()
        else:
            leftovers = {}
        if soak.net is not None:
            soak.net.undo()
    if results is None:
        return 1
    soak_checks.check_after_teardown(soak, results, leftovers)
    ok = soak_checks.report(soak, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""A real Convoy cluster on loopback for end-to-end tests: a coordinator and workers as
separate processes, driven through the `convoy` CLI. Everything it starts is killed at
teardown, and teardown checks /proc that no process of any job survived."""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

BIN = os.environ.get("CONVOY_BIN_DIR", os.path.join(os.path.dirname(__file__), "../../build/bin"))
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_gone(pid):
    """True when `pid` has exited: no /proc entry (it can vanish between two reads) or a
    zombie its parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def job_pids(job_id, attempt=None, root=None):
    """PIDs of live processes whose environment has CONVOY_JOB_ID=job_id (and
    CONVOY_ATTEMPT=attempt when given; and, with `root`, a path under it, such as the
    CONVOY_METRICS_SOCKET of a cluster in `root`: job ids repeat across the clusters of tests
    that run at the same time on one machine)."""
    needle = ("CONVOY_JOB_ID=" + job_id).encode()
    attempt_needle = None if attempt is None else f"CONVOY_ATTEMPT={attempt}".encode()
    under = None if root is None else os.path.join(root, "").encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env and (attempt_needle is None or attempt_needle in env) \
                and (under is None or any(e.split(b"=", 1)[-1].startswith(under) for e in env)) \
                and not process_gone(int(entry)):
            pids.append(int(entry))
    return pids


def rank_pid(job_id, rank, root=None):
    """The PID of the job's rank `rank` (within a cluster under `root`, as job_pids)."""
    for pid in job_pids(job_id, root=root):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env:
            return pid
    return None


def wait_for(predicate, timeout, what, interval=None):
    """Polls `predicate` until it returns something true, then returns that. With no
    `interval` it polls at once, then after 50 ms, growing by half each time up to 0.5 s:
    most predicates run the CLI (a process, a connection and an RPC: about 45 ms of CPU with
    the coordinator's share), and waits that polled ten times a second cost CI's CPU-bound
    machine for nothing (e2e_failures: 122 CPU-s, 113 with the backoff). Pass `interval`
    where the latency is measured."""
    deadline = time.time() + timeout
    pause = interval if interval is not None else 0.05
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(min(pause, max(0.0, deadline - time.time())))
        if interval is None:
            pause = min(0.5, pause * 1.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def worker_cgroup_dirs(name, work_dir):
    """The cgroup directories (per controller) that a worker named `name` with `work_dir`
    makes for its ranks: convoy-NAME-<8 hex of sha256(its canonical work dir)> under the
    cgroup it was started in (this process's: workers are its children)."""
    import hashlib
    base = f"convoy-{name}-" + hashlib.sha256(
        os.path.realpath(work_dir).encode()).hexdigest()[:8]
    dirs = []
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return dirs
    for line in lines:
        _, controllers, path = line.split(":", 2)
        roots = ["/sys/fs/cgroup"] if controllers == "" else \
            [os.path.join("/sys/fs/cgroup", c) for c in controllers.split(",")]
        for root in roots:
            d = os.path.join(root, path.lstrip("/"), base)
            if os.path.isdir(d) and os.path.realpath(d) not in map(os.path.realpath, dirs):
                dirs.append(d)
    return dirs


def remove_worker_cgroups(name, work_dir, timeout=10):
    """Removes what a worker killed with SIGKILL left of its cgroups (a worker that stops
    cleanly removes them itself): the processes still in them are killed, then every group
    is removed, deepest first."""
    deadline = time.time() + timeout
    for top in worker_cgroup_dirs(name, work_dir):
        while os.path.isdir(top):
            for d, _, _ in os.walk(top, topdown=False):
                try:
                    with open(os.path.join(d, "cgroup.procs")) as f:
                        for pid in f.read().split():
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except OSError:
                                pass
                    os.rmdir(d)
                except OSError:
                    pass
            if os.path.isdir(top):
                if time.time() > deadline:
                    raise AssertionError(f"cannot remove the cgroups of worker {name}: {top}")
                time.sleep(0.05)


class Cluster:
    def __init__(self, workers=2, slots=1, worker_timeout=10, kill_grace_ms=3000, secure=False,
                 coordinator_extra=(), worker_extra=()):
        """secure: the default deployment (TLS with a CA made by `convoy-coordinator init`,
        workers joined with a join token, the CLI with an admin token); else --insecure.
        coordinator_extra, worker_extra: more flags for the daemons."""
        self.dir = tempfile.mkdtemp(prefix="convoy-e2e-")
        # Run as root, workers run ranks as the `convoy` user (issue 12): it must reach the
        # jobs' directories (the workers' --job-root, shared like a network file system would
        # be) and the metrics sockets under the work dirs. mkdtemp makes 0700.
        os.chmod(self.dir, 0o755)
        self.job_root = os.path.join(self.dir, "jobs")
        # Host memory for the ranks' snapshots, this cluster's own: the default
        # /dev/shm/convoy-NAME is shared by every cluster whose workers have the same names
        # (issue 26). Removed at teardown with the cluster's directory.
        self.shm_dir = tempfile.mkdtemp(prefix="convoy-e2e-", dir="/dev/shm") \
            if os.path.isdir("/dev/shm") else os.path.join(self.dir, "shm")
        # The ranks' user must pass through it to the worker's snapshot directory (as
        # self.dir): mkdtemp makes 0700, and the ranks then write no snapshot at all.
        if os.path.isdir(self.shm_dir):
            os.chmod(self.shm_dir, 0o755)
        self.secure = secure
        self.coordinator_extra = list(coordinator_extra)
        self.worker_extra = list(worker_extra)
        self.port = free_port()
        self.metrics_port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.worker_timeout = worker_timeout
        self.kill_grace_ms = kill_grace_ms
        self.procs = {}
        self.jobs = []
        self.token = None
        try:
            if secure:
                self.fingerprint = self.admin("init").stdout.strip()
                self.join_token = self.make_token("worker", uses=workers + 4)
                self.token = self.make_token("admin", user="root")
            self.start_coordinator()
            for i in range(1, workers + 1):
                self.start_worker(f"w{i}", slots)
            self.wait_workers_ready(workers)
        except BaseException:
            self.close()  # nothing started may outlive a cluster that failed to come up
            raise

    # ---- processes
    def _spawn(self, name, argv, env=None):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True,
                                            env=None if env is None else {**os.environ, **env})
        return self.procs[name]

    def admin(self, *args):
        """convoy-coordinator's local commands (init, token ...) on this cluster's state."""
        return subprocess.run([os.path.join(BIN, "convoy-coordinator"), *args, "--state-dir",
                               os.path.join(self.dir, "state")],
                              capture_output=True, text=True, timeout=30, check=True)

    def make_token(self, role, user=None, ttl=None, uses=None):
        args = ["token", "create", "--role", role]
        if user:
            args += ["--user", user]
        if ttl:
            args += ["--ttl", ttl]
        if uses:
            args += ["--uses", str(uses)]
        return self.admin(*args).stdout.strip()

    def snapshot_dir(self, name):
        """The --snapshot-dir of this cluster's worker `name`."""
        return os.path.join(self.shm_dir, name)

    def ca_path(self):
        return os.path.join(self.dir, "state", "tls", "ca.crt")

    def start_coordinator(self):
        return self._spawn("coordinator", [
            os.path.join(BIN, "convoy-coordinator"), "--listen", self.target,
            "--state-dir", os.path.join(self.dir, "state"),
            "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
            *([] if self.secure else ["--insecure"]), *self.coordinator_extra,
            "--worker-timeout", str(self.worker_timeout),
            "--kill-grace-ms", str(self.kill_grace_ms)])

    def start_worker(self, name, slots=1, extra=(), env=None):
        """env: variables added to the worker's environment (CUDA_VISIBLE_DEVICES, say)."""
        return self._spawn(name, [
            os.path.join(BIN, "convoy-worker"), "--coordinator", self.target, "--name", name,
            "--advertise-address", "127.0.0.1", "--slots", str(slots), "--cores", "1",
            "--work-dir", os.path.join(self.dir, name), "--job-root", self.job_root,
            *([] if "--snapshot-dir" in [*self.worker_extra, *extra]
              else ["--snapshot-dir", self.snapshot_dir(name)]),
            *(["--join-token", self.join_token, "--ca-fingerprint", self.fingerprint]
              if self.secure else ["--insecure"]),
            "--kill-grace-ms", str(self.kill_grace_ms), *self.worker_extra, *extra], env=env)

    def signal(self, name, sig):
        self.procs[name].send_signal(sig)
        if sig == signal.SIGKILL:
            self.procs[name].wait(timeout=10)

    def restart_coordinator(self):
        self.signal("coordinator", signal.SIGKILL)
        self.start_coordinator()

    def logs_of(self, name):
        try:
            with open(os.path.join(self.dir, name + ".log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def print_logs(self, names=None, chars=3000):
        """Prints the end of each daemon's log (all of them by default), for a failed test."""
        for name in self.procs if names is None else names:
            print(f"==== {name} log (last {chars} chars) ====\n{self.logs_of(name)[-chars:]}")

    # ---- the CLI
    def cli(self, *args, check=True, timeout=60, token=None):
        """The CLI as the cluster's admin, or as the holder of `token`."""
        creds = []
        if self.secure:
            creds = ["--ca", self.ca_path(), "--token", token or self.token]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVOY_")}
        env["HOME"] = self.dir  # no config file of the person running the tests
        r = subprocess.run([os.path.join(BIN, "convoy"), "--coordinator", self.target, *creds,
                            *args], capture_output=True, text=True, timeout=timeout, env=env)
        if check and r.returncode != 0:
            raise AssertionError(f"convoy {' '.join(args)} exited {r.returncode}: {r.stderr}")
        return r

    def workers(self):
        return json.loads(self.cli("workers", "--output", "json").stdout).get("workers", [])

    def wait_workers_ready(self, n, timeout=30):
        def ready():
            try:
                return sum(w["state"] == "WORKER_READY" for w in self.workers()) >= n
            except AssertionError:
                return False  # the coordinator is not listening yet
        try:
            wait_for(ready, timeout, f"{n} ready workers")
        except AssertionError as e:
            # Say why: what each process printed, and whether it still runs.
            tails = []
            for name, proc in self.procs.items():
                code = proc.poll()
                tails.append(f"--- {name} ({'running' if code is None else f'exited {code}'}),"
                             f" the end of its log:\n{self.logs_of(name)[-3000:]}")
            raise AssertionError(f"{e}\n" + "\n".join(tails)) from None

    def submit(self, spec):
        path = os.path.join(self.dir, f"spec-{len(self.jobs)}.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        r = self.cli("submit", path, "--output", "json")
        job_id = json.loads(r.stdout)["job_id"]
        self.jobs.append(job_id)
        return job_id

    def status(self, job_id):
        return json.loads(self.cli("status", job_id, "--output", "json").stdout)

    def job_dir_name(self, job_id):
        """The name of the job's directories on a worker (under the job root and WORK/jobs):
        its id and its uid, never the id alone (ids repeat across clusters)."""
        return f"{job_id}-{self.status(job_id)['uid']}"

    def job_dir(self, job_id):
        return os.path.join(self.job_root, self.job_dir_name(job_id))

    def wait_state(self, job_id, states, timeout=120):
        states = {states} if isinstance(states, str) else set(states)

        def reached():
            try:
                job = self.status(job_id)
            except AssertionError:
                return None  # the coordinator may be restarting
            return job if job["state"] in states else None
        return wait_for(reached, timeout, f"job {job_id} in {sorted(states)}")

    def logs(self, job_id, rank, attempt=None):
        args = ["logs", job_id, "--rank", str(rank)]
        if attempt is not None:
            args += ["--attempt", str(attempt)]
        return self.cli(*args).stdout

    def job_pids(self, job_id, attempt=None):
        """job_pids of this cluster's jobs only."""
        return job_pids(job_id, attempt, root=self.dir)

    def rank_pid(self, job_id, rank):
        """rank_pid of this cluster's job only."""
        return rank_pid(job_id, rank, root=self.dir)

    # ---- teardown
    def close(self):
        leftovers = {}
        for job in self.jobs:
            try:
                wait_for(lambda: not self.job_pids(job), 10, f"no process of {job}")
            except AssertionError:
                leftovers[job] = self.job_pids(job)
        for name, p in self.procs.items():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait(timeout=10)
        for job in self.jobs:  # nothing may survive its worker either
            for pid in self.job_pids(job):
                os.kill(pid, signal.SIGKILL)
        # The workers' cgroups (killed with SIGKILL, they could not remove them).
        for name in self.procs:
            if name != "coordinator":
                try:
                    remove_worker_cgroups(name, os.path.join(self.dir, name))
                except AssertionError as e:
                    leftovers["cgroups of " + name] = str(e)
        # Nothing of the cluster stays on the machine: its directory (state, work dirs, job
        # root, logs) and its snapshots. Logs a failed test prints are read before close().
        shutil.rmtree(self.shm_dir, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        return leftovers


# Whether trainer_spec's jobs evaluate on the test set after training by default. The e2e
# tests (tests/e2e/conftest.py) set it to False: evaluating is 10,000 forward passes, about
# 4.5 CPU-s a job, and only the tests that check the accuracy pass evaluate=True.
EVALUATE = True


def trainer_spec(name="fmnist", nodes=2, procs=1, max_steps=150, evaluate=None, **extra):
    spec = {
        "name": name, "nodes": nodes, "procs_per_node": procs, "backend": "gloo",
        "trainer": {"model": "fmnist-cnn", "epochs": 1, "batch_size": 32, "lr": 0.01,
                    "max_steps": max_steps},
    }
    if not (EVALUATE if evaluate is None else evaluate):
        spec["trainer"]["extra_args"] = ["--no-eval"]
    spec.update(extra)
    return spec

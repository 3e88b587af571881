"""Issue 17: with --warm-python, the ranks of a Python `command:` job are forked from a
forkserver that has imported torch (worker/exec/convoy-forkserver.py), set up exactly as a cold
rank is, and nothing of it outlives its worker."""

import json
import os
import re
import shutil
import signal

import pytest

from cluster import process_gone, wait_for
from test_e2e_security import run_as_uid

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python")
HAVE_TORCH = os.path.exists("/usr/lib/python3/dist-packages/torch")
PY = "/usr/bin/python3"
ENV = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
# The warm Python: one forkserver per worker, serving every job identity (issue 45). These
# tests run every job as one shared --run-as user, whose uid they check; the last one uses an
# identity per job, the default.
WARM = ["--warm-python", PY, "--run-as", "convoy"]

pytestmark = pytest.mark.skipif(not HAVE_TORCH, reason="needs Debian's python3-torch")

# What a rank sees of itself; the same cold and warm, but for what the README says differs.
PROBE = r'''
import ctypes, json, os, random, signal, sys
import numpy
import torch
libc = ctypes.CDLL(None)
pdeathsig = ctypes.c_int(0)
libc.prctl(2, ctypes.byref(pdeathsig), 0, 0, 0)  # PR_GET_PDEATHSIG
def disposition(s):
    h = signal.getsignal(s)
    return h if isinstance(h, int) else getattr(h, "__name__", repr(h))
with open("/proc/self/status") as f:
    status = dict(line.split(":", 1) for line in f)
with open("/proc/self/environ", "rb") as f:
    proc_env = sorted(e.split(b"=", 1)[0].decode() for e in f.read().split(b"\0") if e)
with open("/proc/self/cmdline", "rb") as f:  # (a warm rank's has NUL padding after it)
    cmdline = [a.decode() for a in f.read().rstrip(b"\0").split(b"\0")]
umask = os.umask(0o77)
facts = {
    "argv": sys.argv, "orig_argv": sys.orig_argv, "path0": sys.path[0], "file": __file__,
    "cwd": os.getcwd(), "executable": sys.executable, "name": __name__,
    "loader": type(__loader__).__name__, "spec": repr(__spec__),
    "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "own_group": os.getpgrp() == os.getpid(), "umask": umask,
    "fds": sorted(os.listdir("/proc/self/fd")), "stdin": os.readlink("/proc/self/fd/0"),
    "signals": {n: disposition(getattr(signal, n)) for n in
                ("SIGINT", "SIGPIPE", "SIGTERM", "SIGCHLD", "SIGXFSZ", "SIGHUP", "SIGUSR1")},
    "blocked": status["SigBlk"].strip(), "ignored": status["SigIgn"].strip(),
    # (glibc's own signals 32 and 33 left out: its set-id broadcast handler is installed in a
    # process that ever had a thread, as the forkserver had while importing torch)
    "caught": "%x" % (int(status["SigCgt"], 16) & ~0x180000000), "dumpable": libc.prctl(3, 0, 0, 0, 0),
    "pdeathsig": pdeathsig.value, "env": sorted(os.environ), "proc_env": proc_env,
    "cmdline": cmdline, "flags": list(sys.flags), "bytecode": sys.dont_write_bytecode,
    "stdout": [sys.stdout.line_buffering, sys.stdout.write_through, sys.stdout.encoding],
    "threads": torch.get_num_threads(), "tasks": len(os.listdir("/proc/self/task")),
    "numpy_random": numpy.random.random(), "random": random.random(),
}
print("FACTS " + json.dumps(facts), flush=True)
sys.exit(3)
'''

FAIL = ("from torch.distributed.elastic.multiprocessing.errors import record\n\n"
        "@record\ndef main():\n    raise ValueError('boom')\n\nmain()\n")


def stat_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def children_named(parent, needle):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if int(stat_of(int(entry))[1]) != parent or process_gone(int(entry)):
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if needle in f.read():
                    found.append(int(entry))
        except (OSError, IndexError):
            continue
    return found


def forkserver_of(c, name):
    wait_for(lambda: "warm Python ready" in c.logs_of(name), 60,
             f"{name}'s warm Python")
    (pid,) = children_named(c.procs[name].pid, b"convoy-forkserver.py")
    return pid


def submit_code(c, tmp_path, name, spec):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(spec))
    job = json.loads(c.cli("submit", str(path), "--code", str(tmp_path / "code"), "--output",
                           "json").stdout)["job_id"]
    c.jobs.append(job)
    return job


def probe_facts(c, job, ranks):
    out = {}
    for r in range(ranks):
        text = c.logs(job, r)
        m = re.search(r"^FACTS (.*)$", text, re.M)
        assert m, text
        # Its directories are named by id and uid (both differ between the two jobs).
        name = c.job_dir_name(job)
        out[r] = json.loads(m.group(1).replace(name, "JOB").replace(job, "JOB"))
    return out


def test_a_forked_python_rank_is_set_up_as_a_cold_one(make_cluster, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "probe.py").write_text(PROBE)
    (code / "fail.py").write_text(FAIL)
    c = make_cluster(workers=1, slots=2, worker_extra=WARM)
    server = forkserver_of(c, "w1")
    spec = {"name": "probe", "nodes": 1, "procs_per_node": 2, "command": ["python3", "probe.py"],
            "env": ENV, "max_restarts": 0}
    warm_job = submit_code(c, tmp_path, "warm", spec)
    pids = wait_for(lambda: (lambda p: p if len(p) == 2 else None)(c.job_pids(warm_job)), 60,
                    "both warm ranks", interval=0.02)
    assert all(int(stat_of(p)[1]) == server for p in pids), (pids, server)
    st = c.wait_state(warm_job, {"FAILED", "SUCCEEDED"}, timeout=120)
    assert "exited with code 3" in json.dumps(st), st  # SystemExit(3)
    warm = probe_facts(c, warm_job, 2)
    fail_warm = submit_code(c, tmp_path, "fail-warm", dict(spec, procs_per_node=1,
                                                           command=["python3", "fail.py"]))
    c.wait_state(fail_warm, "FAILED", timeout=120)

    # The same jobs cold, on a worker without --warm-python.
    c.cli("drain", "w1")
    c.start_worker("w2", 2)
    c.wait_workers_ready(2)
    cold_job = submit_code(c, tmp_path, "cold", spec)
    st = c.wait_state(cold_job, {"FAILED", "SUCCEEDED"}, timeout=120)
    assert "exited with code 3" in json.dumps(st), st
    cold = probe_facts(c, cold_job, 2)
    fail_cold = submit_code(c, tmp_path, "fail-cold", dict(spec, procs_per_node=1,
                                                           command=["python3", "fail.py"]))
    c.wait_state(fail_cold, "FAILED", timeout=120)

    for r in range(2):
        w, k = dict(warm[r]), dict(cold[r])
        # Each process draws its own random numbers, warm or cold.
        for key in ("numpy_random", "random"):
            w.pop(key), k.pop(key)
        # The forkserver runs isolated (-I): sys.flags says so in a warm rank, and only there
        # (no_user_site, ignore_environment, isolated, safe_path).
        wf, kf = w.pop("flags"), k.pop("flags")
        assert [i for i in range(len(wf)) if wf[i] != kf[i]] == [5, 7, 12, 16], (wf, kf)
        assert w == k, {key: (w[key], k.get(key)) for key in w if w[key] != k.get(key)}
    assert warm[0]["uid"] == run_as_uid() and warm[0]["own_group"]
    assert warm[0]["threads"] == 1  # OMP_NUM_THREADS, applied after the fork
    # Two ranks forked from one forkserver do not share numpy's or random's state.
    assert warm[0]["numpy_random"] != warm[1]["numpy_random"]
    assert warm[0]["random"] != warm[1]["random"]
    # An uncaught exception: the traceback a cold rank prints (no forkserver frame), exit 1.
    logs = {job: c.logs(job, 0).replace(c.job_dir_name(job), "JOB").replace(job, "JOB")
            for job in (fail_warm, fail_cold)}
    assert logs[fail_warm] == logs[fail_cold], logs
    assert logs[fail_warm].startswith("Traceback (most recent call last):\n  File \"/"), logs
    assert "ValueError: boom" in logs[fail_warm]
    for job in (fail_warm, fail_cold):  # and torch's @record wrote TORCHELASTIC_ERROR_FILE
        text = json.dumps(c.status(job))
        assert "exited with code 1" in text and "raised ValueError: boom" in text, text


def test_the_python_example_forks_from_the_warm_python_which_dies_with_its_worker(
        make_cluster, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    for f in ("train_ddp.py", "convoy_metrics.py"):
        shutil.copy(os.path.join(EXAMPLES, f), code)
    c = make_cluster(workers=2, worker_extra=WARM)
    servers = {name: forkserver_of(c, name) for name in ("w1", "w2")}
    argv = ["python3", "train_ddp.py", "--max-steps", "100000", "--batch-size", "32"]
    job = submit_code(c, tmp_path, "ddp", {"name": "ddp", "nodes": 2, "procs_per_node": 1,
                                           "command": argv, "env": ENV})
    ranks = wait_for(lambda: (lambda p: p if len(p) == 2 else None)(c.job_pids(job)), 60,
                     "both ranks")
    by_worker = {}
    for pid in ranks:
        parent = int(stat_of(pid)[1])
        owner = [name for name, s in servers.items() if s == parent]
        assert owner, f"rank {pid}'s parent {parent} is not a forkserver"
        by_worker[owner[0]] = pid
        with open(f"/proc/{pid}/status") as f:
            uid = [line.split()[1] for line in f if line.startswith("Uid:")][0]
        assert int(uid) == run_as_uid()
        assert int(stat_of(pid)[2]) == pid  # its own process group
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert f.read().rstrip(b"\0").split(b"\0") == [a.encode() for a in argv]
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
        assert f"CONVOY_JOB_ID={job}".encode() in env
        assert not any(e.startswith(b"CONVOY_ZYGOTE_PAD") for e in env)
    assert sorted(by_worker) == ["w1", "w2"], by_worker
    # It trains: steps reach the coordinator.
    wait_for(lambda: any(int(m.get("step", 0)) >= 5
                         for m in c.status(job).get("latest", [])), 120, "5 steps")

    # kill -9 of a worker: its forkserver and the rank forked from it die with it.
    c.signal("w1", signal.SIGKILL)
    gone = [servers["w1"], by_worker["w1"]]
    wait_for(lambda: all(process_gone(p) for p in gone), 15, "no process of w1 left")
    c.cli("cancel", job)
    c.wait_state(job, "CANCELLED", timeout=60)


def test_the_first_job_of_every_identity_forks_warm(make_cluster, tmp_path):
    """Issue 45: with an identity per job (the default), the first rank of each job forks from
    the worker's one forkserver and runs as its own job's identity, never root."""
    if os.geteuid() != 0:
        pytest.skip("identities per job need a root worker")
    code = tmp_path / "code"
    code.mkdir()
    (code / "who.py").write_text("import os; print('WHO', os.getuid(), os.getgid(), flush=True)\n"
                                 "import time; time.sleep(1)\n")
    c = make_cluster(workers=1, slots=2, worker_extra=["--warm-python", PY])
    server = forkserver_of(c, "w1")
    jobs = [submit_code(c, tmp_path, f"who{i}", {"name": f"who{i}", "nodes": 1,
                                                  "procs_per_node": 1, "max_restarts": 0,
                                                  "command": ["python3", "who.py"], "env": ENV})
            for i in range(2)]
    parents = {}
    for job in jobs:
        pid = wait_for(lambda: c.rank_pid(job, 0), 60, f"{job}'s rank")
        parents[job] = int(stat_of(pid)[1])
    uids = []
    for job in jobs:
        st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)
        assert st["state"] == "SUCCEEDED", (st["message"], c.logs(job, 0))
        m = re.search(r"^WHO (\d+) (\d+)$", c.logs(job, 0), re.M)
        assert m, c.logs(job, 0)
        uids.append(int(m.group(1)))
    assert parents == {job: server for job in jobs}, "a job's first rank started cold"
    assert len(set(uids)) == 2 and 0 not in uids, uids
    assert "a Python rank starts cold" not in c.logs_of("w1")

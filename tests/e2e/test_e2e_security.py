"""Issue 12, "Jobs run as an unprivileged user": a root worker runs every rank as --run-as
(`convoy`, made by scripts/install-deps.sh); a job's paths resolve under the job root."""

import os
import pwd
import subprocess

import pytest

from cluster import BIN, wait_for


# The uids a root worker gives jobs by default (--run-as-pool).
POOL = (61184, 65519)


def run_as_uid():
    """The uid of --run-as convoy: `convoy` under a root worker, else the worker's own."""
    if os.geteuid() != 0:
        return os.geteuid()
    return pwd.getpwnam("convoy").pw_uid


def job_uid(c, job):
    """The uid `job`'s ranks run as: under a root worker its own identity from the pool (the
    owner of the job directory the worker made for it), else the worker's own."""
    if os.geteuid() != 0:
        return os.geteuid()
    uid = os.stat(c.job_dir(job)).st_uid
    assert POOL[0] <= uid <= POOL[1], f"{job} runs as uid {uid}, not one of the pool {POOL}"
    return uid


def test_each_job_runs_as_an_identity_of_its_own_never_root(make_cluster):
    c = make_cluster(workers=1)
    command = ["sh", "-c", "id -u; id -G; echo \"$HOME $USER\"; pwd; "
               "touch in-job-dir && echo wrote"]
    jobs = [c.submit({"name": f"whoami{i}", "nodes": 1, "procs_per_node": 1,
                      "command": command}) for i in range(2)]
    uids = []
    for job in jobs:
        st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)
        assert st["state"] == "SUCCEEDED", st["message"]
        lines = c.logs(job, 0).splitlines()
        uid = job_uid(c, job)
        uids.append(uid)
        assert lines[0] == str(uid), lines
        job_dir = c.job_dir(job)
        assert lines[3] == job_dir, lines  # the job's own directory is its working directory
        assert lines[4] == "wrote", lines  # ... and it may write there
        st_dir = os.stat(job_dir)
        assert st_dir.st_uid == uid and st_dir.st_mode & 0o777 == 0o700
        assert os.stat(os.path.join(job_dir, "in-job-dir")).st_uid == uid
        if os.geteuid() == 0:
            assert uid != 0
            assert lines[1] == str(uid), f"not its own group alone: {lines}"
            assert lines[2] == f"{job_dir} convoy-job-{uid}", lines
    if os.geteuid() != 0:
        pytest.skip("not root: ranks run as the test's own user (checked above); identities "
                    "per job are only tested as root")
    assert uids[0] != uids[1], "two jobs shared an identity"
    # The worker says so when it starts.
    assert "ranks run as an identity of their own per job: a uid and gid from the pool " \
        f"{POOL[0]}-{POOL[1]}" in c.logs_of("w1")
    # Deleted, a job's identity is released with its files.
    c.cli("delete", jobs[0])
    wait_for(lambda: f"its identity (uid {uids[0]}) is released" in c.logs_of("w1"), 30,
             "the identity released")


def test_a_shared_run_as_user_is_said_to_isolate_nothing(make_cluster):
    if os.geteuid() != 0:
        pytest.skip("only a root worker switches users; this test is not root")
    c = make_cluster(workers=0)
    c.start_worker("w1", extra=["--run-as", "convoy"])
    c.wait_workers_ready(1)
    job = c.submit({"name": "whoami", "nodes": 1, "procs_per_node": 1,
                    "command": ["sh", "-c", "id -u"]})
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert st["state"] == "SUCCEEDED", st["message"]
    assert c.logs(job, 0).splitlines()[0] == str(run_as_uid())
    log = c.logs_of("w1")
    assert f"ranks run as convoy (uid {run_as_uid()}" in log
    assert "jobs are not isolated from each other" in log


def test_root_worker_refuses_root_jobs_and_unknown_users(make_cluster):
    if os.geteuid() != 0:
        pytest.skip("only a root worker switches users; this test is not root")
    c = make_cluster(workers=1)
    base = [os.path.join(BIN, "convoy-worker"), "--coordinator", c.target, "--insecure",
            "--work-dir", os.path.join(c.dir, "refused"), "--job-root", c.job_root,
            "--snapshot-dir", c.snapshot_dir("refused")]
    r = subprocess.run(base + ["--name", "r1", "--run-as", "root"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--allow-root-jobs" in r.stderr, r.stderr
    r = subprocess.run(base + ["--name", "r2", "--run-as", "no-such-user-convoy"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "useradd --system" in r.stderr, r.stderr
    assert {w["name"] for w in c.workers()} == {"w1"}


def test_checkpoint_dir_climbing_out_is_refused_at_submit(make_cluster, tmp_path):
    c = make_cluster(workers=1)
    spec = tmp_path / "job.yaml"
    spec.write_text("name: escape\nnodes: 1\nprocs_per_node: 1\ncommand: [true]\n"
                    "checkpoint_dir: ../../etc\n")
    r = c.cli("submit", str(spec), check=False)
    assert r.returncode != 0
    assert "checkpoint_dir: '../../etc' must not contain '..'" in r.stderr, r.stderr
    assert c.cli("list", "--output", "json").stdout.count('"id"') == 0


def test_symlink_out_of_the_job_root_fails_the_job_naming_the_field(make_cluster):
    c = make_cluster(workers=1)
    wait_for(lambda: os.path.isdir(c.job_root), 10, "the job root")
    link = os.path.join(c.job_root, "etc-link")
    os.symlink("/etc", link)
    job = c.submit({"name": "escape", "nodes": 1, "procs_per_node": 1,
                    "command": ["sh", "-c", "touch $CONVOY_CHECKPOINT_DIR/pwned"],
                    "checkpoint_dir": link, "max_restarts": 0})
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert st["state"] == "FAILED"
    expected = (f"checkpoint_dir: {link} resolves to /etc, outside the job's own directory "
                f"{c.job_dir(job)}")
    text = c.cli("status", job).stdout
    assert expected in text, text
    assert not os.path.exists("/etc/pwned")
    assert not c.job_pids(job)
    assert not os.path.exists(c.job_dir(job)), "nothing made for a refused job"


def _others_can_read(path):
    return os.lstat(path).st_mode & 0o077 != 0


def test_hosts_stay_private_modes_and_environment(make_cluster, monkeypatch):
    """Issue 18, "private by default": after a job, what it leaves on the worker and the
    coordinator is nobody else's (logs, database, its lock, the metrics socket while it ran),
    and a rank never sees a worker variable outside the allowlist."""
    monkeypatch.setenv("E2E_WORKER_SECRET", "s3cret")       # in every daemon's environment
    monkeypatch.setenv("E2E_PASSED_ON", "visible")
    c = make_cluster(workers=0)
    c.start_worker("w1", extra=["--pass-env", "E2E_PASSED_*"])
    c.wait_workers_ready(1)
    job = c.submit({"name": "private", "nodes": 1, "procs_per_node": 1,
                    "command": ["sh", "-c",
                                "env | sort; stat -c '%a %u' \"$CONVOY_METRICS_SOCKET\"; "
                                "umask; echo out > mine.txt"]})
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert st["state"] == "SUCCEEDED", st["message"]
    lines = c.logs(job, 0).splitlines()
    env = dict(line.split("=", 1) for line in lines if "=" in line)
    assert "E2E_WORKER_SECRET" not in env, "a worker variable outside the allowlist leaked"
    assert env.get("E2E_PASSED_ON") == "visible", "--pass-env did not pass it on"
    # --rank-huge-pages, on by default: the ranks' malloc uses transparent huge pages.
    assert env.get("GLIBC_TUNABLES") == "glibc.malloc.hugetlb=1", env.get("GLIBC_TUNABLES")
    assert env["RANK"] == "0" and "PATH" in env
    uid = job_uid(c, job)
    assert f"600 {uid}" in lines, f"metrics socket not 0600 and the rank's user's: {lines}"
    assert "0077" in lines, lines  # the rank's umask: its own files are private too
    # The files the job left: none is readable or writable by others.
    left = []
    for top in (os.path.join(c.dir, "w1"), c.job_dir(job),
                os.path.join(c.dir, "state")):
        for root, dirs, files in os.walk(top):
            left += [os.path.join(root, n) for n in dirs + files]
    logs = [p for p in left if p.endswith(".log")]
    assert logs, left
    for p in logs:
        assert os.lstat(p).st_uid == uid, f"{p} is not the rank's user's"
    state = os.path.join(c.dir, "state")
    assert os.path.exists(os.path.join(state, "convoy.db"))
    assert os.path.exists(os.path.join(state, "convoy.db.lock"))
    # The worker's data cache holds public data (decompressed copies of what
    # trainer.data_dir names) that ranks of every identity read: readable by design, but
    # written by no one but the worker (the tenants test checks what another uid can do).
    shared = os.path.join(c.dir, "w1", "data-cache", "shared") + os.sep
    for p in left:
        if p.startswith(shared):
            st = os.lstat(p)
            assert st.st_uid == os.getuid() and st.st_mode & 0o022 == 0, \
                f"{p} {oct(st.st_mode & 0o777)} uid {st.st_uid}: the data cache is the worker's"
    leaky = [f"{p} {oct(os.lstat(p).st_mode & 0o777)}" for p in left
             if not p.startswith(shared) and _others_can_read(p) and
             not (os.path.isdir(p) and os.lstat(p).st_mode & 0o077 == 0o011)]
    assert not leaky, f"readable by others: {leaky}"
    mine = os.path.join(c.job_dir(job), "mine.txt")
    assert os.lstat(mine).st_mode & 0o777 == 0o600

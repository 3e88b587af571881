"""Issue 27, "Tenants cannot touch each other": on a secure cluster, alice's and bob's jobs
run on one worker, each as an identity of its own (--run-as pool, the default). Bob's rank
tries every way into alice's running job and into the coordinator's state, and each fails
with EACCES or EPERM; alice's job SUCCEEDS untouched."""
import json
import os

import pytest

from cluster import trainer_spec, wait_for
from test_e2e_security import job_uid

# Bob's rank: tries each access named in its environment, prints RESULT <what> <errno name>
# ("OK" when it worked).
PROBE = r'''
import errno, os, signal, socket

def attempt(what, fn):
    try:
        fn()
        print("RESULT", what, "OK", flush=True)
    except OSError as e:
        print("RESULT", what, errno.errorcode.get(e.errno, str(e.errno)), flush=True)

def read(path):
    with open(path, "rb") as f:
        f.read(1)

def write(path):
    with open(path, "wb") as f:
        f.write(b"bob was here")

def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
    finally:
        s.close()

e = os.environ
attempt("read-file", lambda: read(e["ALICE_DIR"] + "/secret.txt"))
attempt("list-job-dir", lambda: os.listdir(e["ALICE_DIR"]))
attempt("read-code", lambda: read(e["ALICE_DIR"] + "/alice.sh"))
attempt("read-log", lambda: read(e["ALICE_LOG"]))
attempt("read-environ", lambda: read("/proc/%s/environ" % e["ALICE_PID"]))
attempt("signal", lambda: os.kill(int(e["ALICE_PID"]), signal.SIGTERM))
attempt("write-checkpoint", lambda: write(e["ALICE_CKPT"] + "/ckpt-000000000999.pt"))
attempt("connect-metrics", lambda: connect(e["ALICE_SOCKET"]))
attempt("read-ca-key", lambda: read(e["STATE"] + "/tls/ca.key"))
attempt("read-database", lambda: read(e["STATE"] + "/convoy.db"))
attempt("read-worker-key", lambda: read(e["WORKER_TLS"]))
'''

ALICE = ("echo private > secret.txt; mkdir -p \"$CONVOY_CHECKPOINT_DIR\"; "
         "echo alice-was-here; i=0; while [ $i -lt 600 ] && [ ! -e done ]; do sleep 0.1; "
         "i=$((i+1)); done; test \"$(cat secret.txt)\" = private && "
         "test -z \"$(ls \"$CONVOY_CHECKPOINT_DIR\")\" && echo untouched")


def environ_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(e.decode().split("=", 1) for e in f.read().split(b"\0") if b"=" in e)


def test_one_tenants_rank_cannot_reach_anothers_job_or_the_control_plane(make_cluster, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("identities per job need a root worker; this test is not root")
    c = make_cluster(workers=1, slots=2, secure=True)
    alice = c.make_token("user", user="alice")
    bob = c.make_token("user", user="bob")

    def submit(spec, token, code=None):
        path = tmp_path / f"{spec['name']}.json"
        path.write_text(json.dumps(spec))
        args = ["submit", str(path), "--output", "json"] + (["--code", str(code)] if code else [])
        job = json.loads(c.cli(*args, token=token).stdout)["job_id"]
        c.jobs.append(job)
        return job

    code = tmp_path / "alice-code"
    code.mkdir()
    (code / "alice.sh").write_text(ALICE)
    a = submit({"name": "alice", "nodes": 1, "procs_per_node": 1,
                "command": ["sh", "alice.sh"], "env": {"ALICE_SECRET": "s3cret"},
                "max_restarts": 0}, alice, code)
    a_pid = wait_for(lambda: c.rank_pid(a, 0), 60, "alice's rank")
    wait_for(lambda: "alice-was-here" in c.logs(a, 0), 30, "alice's first line")
    a_env = environ_of(a_pid)
    assert a_env["ALICE_SECRET"] == "s3cret"
    a_dir = c.job_dir(a)
    probe = tmp_path / "bob-code"
    probe.mkdir()
    (probe / "probe.py").write_text(PROBE)
    b = submit({"name": "bob", "nodes": 1, "procs_per_node": 1,
                "command": ["python3", "probe.py"], "max_restarts": 0,
                "env": {"PATH": "/usr/bin:/bin", "ALICE_DIR": a_dir, "ALICE_PID": str(a_pid),
                        "ALICE_LOG": os.path.join(c.dir, "w1", "jobs", c.job_dir_name(a),
                                                  "attempt-0", "rank-0.log"),
                        "ALICE_CKPT": a_env["CONVOY_CHECKPOINT_DIR"],
                        "ALICE_SOCKET": a_env["CONVOY_METRICS_SOCKET"],
                        "STATE": os.path.join(c.dir, "state"),
                        "WORKER_TLS": os.path.join(c.dir, "w1", "tls", "worker.key")}},
               bob, probe)
    st = c.wait_state(b, {"SUCCEEDED", "FAILED"}, timeout=120)
    assert st["state"] == "SUCCEEDED", (st["message"], c.logs(b, 0))
    results = dict(line.split()[1:3] for line in c.logs(b, 0).splitlines()
                   if line.startswith("RESULT "))
    assert len(results) == 11, c.logs(b, 0)
    allowed = {"EACCES", "EPERM"}
    wrong = {what: r for what, r in results.items() if r not in allowed}
    assert not wrong, f"bob's rank got into alice's job or the control plane: {wrong}"
    # Two identities, neither root nor a daemon's.
    ua, ub = job_uid(c, a), job_uid(c, b)
    assert ua != ub and 0 not in (ua, ub)
    # Alice's job was not touched: it finishes on its own and finds its files as it left them.
    assert c.rank_pid(a, 0) == a_pid
    open(os.path.join(a_dir, "done"), "w").close()
    st = c.wait_state(a, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert st["state"] == "SUCCEEDED", st["message"]
    assert "untouched" in c.logs(a, 0)
    # Bob cannot read alice's log through the coordinator either (owner-only logs.read).
    r = c.cli("logs", a, "--rank", "0", check=False, token=bob)
    assert r.returncode != 0 and "alice-was-here" not in r.stdout


def test_others_see_a_job_without_its_env_values_or_stderr(make_cluster, tmp_path):
    """Issue 28, least visibility: the spec's env values and a failure's stderr are the
    owner's (and admins'); other users and viewers see the names only."""
    c = make_cluster(workers=1, secure=True)
    alice = c.make_token("user", user="alice")
    bob = c.make_token("user", user="bob")
    viewer = c.make_token("viewer", user="vera")
    path = tmp_path / "fails.json"
    path.write_text(json.dumps({"name": "fails", "nodes": 1, "procs_per_node": 1,
                                "max_restarts": 0, "env": {"API_KEY": "s3cret-key"},
                                "command": ["sh", "-c", "printf 'leaked-%s\\n' on-stderr >&2; exit 3"]}))
    job = json.loads(c.cli("submit", str(path), "--output", "json", token=alice).stdout)["job_id"]
    c.jobs.append(job)
    c.wait_state(job, {"FAILED"}, timeout=60)

    def seen(token, *args):
        return c.cli(*args, token=token).stdout
    for token in (alice, c.token):  # the owner and an admin see it all
        text = seen(token, "status", job, "--output", "json")
        assert "s3cret-key" in text and "leaked-on-stderr" in text, text
    for token in (bob, viewer):
        for args in (("status", job, "--output", "json"), ("list", "--output", "json"),
                     ("status", job)):
            text = seen(token, *args)
            assert "s3cret-key" not in text and "leaked-on-stderr" not in text, (args, text)
        st = json.loads(seen(token, "status", job, "--output", "json"))
        assert st["spec"]["env"] == {"API_KEY": "(redacted)"}, st["spec"]
        assert "exited with code 3" in json.dumps(st)  # the cause itself is not hidden


def test_a_work_dir_the_job_identities_cannot_reach_is_refused_at_start():
    """Issue 27, no silent degradation: a worker whose --work-dir lies under a directory its
    job identities cannot pass (their metrics sockets and data cache would be unreachable, and
    jobs would run with no progress, top or plot) refuses to start, naming the path and the
    fix; --check-config says the same."""
    if os.geteuid() != 0:
        pytest.skip("identities per job need a root worker; this test is not root")
    import shutil
    import subprocess
    import tempfile
    from cluster import BIN
    base = tempfile.mkdtemp(prefix="convoy-e2e-")
    try:
        os.chmod(base, 0o711)
        locked = os.path.join(base, "locked")
        os.mkdir(locked, 0o700)
        os.chmod(locked, 0o700)
        argv = [os.path.join(BIN, "convoy-worker"), "--coordinator", "127.0.0.1:9",
                "--insecure", "--name", "w1", "--work-dir", os.path.join(locked, "work"),
                "--job-root", os.path.join(base, "jobs"), "--snapshot-dir", "none"]
        for extra in ([], ["--check-config"]):
            r = subprocess.run(argv + extra, capture_output=True, text=True, timeout=60)
            out = r.stdout + r.stderr
            assert r.returncode != 0, out
            assert (f"--work-dir {locked}/work: the ranks (user a job identity of "
                    "--run-as-pool") in out, out
            assert f"{locked} (owner 0, mode 0700) is not searchable" in out, out
            assert "chmod o+x" in out, out
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_run_as_owner_runs_each_job_as_its_owners_account(make_cluster):
    """Issue 27, --run-as owner: where a site maps Convoy users to Unix accounts, a job runs
    as its owner's account (its files are that account's); an owner without an account on the
    worker is refused, naming the owner."""
    if os.geteuid() != 0:
        pytest.skip("running jobs as another account needs a root worker")
    import pwd
    import subprocess
    name = f"cvyowner{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "--user-group", name], check=True, capture_output=True)
    try:
        account = pwd.getpwnam(name)
        c = make_cluster(workers=1, secure=True, worker_extra=["--run-as", "owner"])
        assert "ranks run as their job owner's account" in c.logs_of("w1")
        owner = c.make_token("user", user=name)
        stranger = c.make_token("user", user="nobodyhere")

        def submit(token, job_name):
            path = os.path.join(c.dir, f"{job_name}.json")
            with open(path, "w") as f:
                json.dump({"name": job_name, "nodes": 1, "procs_per_node": 1, "max_restarts": 0,
                           "command": ["sh", "-c", "echo uid=$(id -u) gid=$(id -g); "
                                       "stat -c owner=%u . "]}, f)
            job = json.loads(c.cli("submit", path, "--output", "json",
                                   token=token).stdout)["job_id"]
            c.jobs.append(job)
            return job
        mine = submit(owner, "mine")
        st = c.wait_state(mine, {"SUCCEEDED", "FAILED"}, timeout=60)
        assert st["state"] == "SUCCEEDED", st["message"]
        log = c.cli("logs", mine, "--rank", "0", token=owner).stdout
        assert f"uid={account.pw_uid} gid={account.pw_gid}" in log, log
        assert f"owner={account.pw_uid}" in log, log  # its job directory is the account's
        theirs = submit(stranger, "theirs")
        st = c.wait_state(theirs, {"SUCCEEDED", "FAILED"}, timeout=60)
        assert st["state"] == "FAILED"
        assert "--run-as owner: job owner 'nobodyhere' has no account on worker w1" in \
            st["message"], st["message"]
    finally:
        subprocess.run(["userdel", name], capture_output=True)


# Issue 45: the data cache is the worker's. Mallory's rank tries to change what other jobs
# read from it; Carol's trainer job then trains from the worker's entries, unchanged.
CACHE_PROBE = r'''
import errno, os
d = os.environ["CONVOY_CACHE_DIR"]
entries = [os.path.join(d, n) for n in os.environ["ENTRIES"].split(",")]

def attempt(what, fn):
    try:
        fn()
        print("RESULT", what, "OK", flush=True)
    except OSError as e:
        print("RESULT", what, errno.errorcode.get(e.errno, str(e.errno)), flush=True)

def write(path, mode="r+b"):
    with open(path, mode) as f:
        f.write(b"planted")

attempt("write-entry", lambda: write(entries[0]))
attempt("write-sidecar", lambda: write(entries[0] + ".meta", "wb"))
attempt("replace-entry", lambda: os.rename(entries[1], entries[0]))
attempt("unlink-entry", lambda: os.unlink(entries[0]))
attempt("plant-file", lambda: write(os.path.join(d, "planted"), "wb"))
attempt("chmod-entry", lambda: os.chmod(entries[0], 0o666))
attempt("list-cache", lambda: os.listdir(d))
'''


def test_no_job_can_change_what_another_reads_from_the_data_cache(make_cluster, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("identities per job need a root worker; this test is not root")
    c = make_cluster(workers=1, slots=1, secure=True)
    cache = os.path.join(c.dir, "w1", "data-cache", "shared")
    wait_for(lambda: "data cache ready" in c.logs_of("w1"), 60, "the worker's prefill")
    entries = sorted(n for n in os.listdir(cache)
                     if not n.endswith((".meta", ".lock")) and ".tmp." not in n)
    assert len(entries) == 4, entries
    before = {n: open(os.path.join(cache, n), "rb").read() for n in entries}
    st = os.stat(cache)
    assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o711

    def submit(spec, token, code=None):
        path = tmp_path / f"{spec['name']}.json"
        path.write_text(json.dumps(spec))
        args = ["submit", str(path), "--output", "json"] + (["--code", str(code)] if code else [])
        job = json.loads(c.cli(*args, token=token).stdout)["job_id"]
        c.jobs.append(job)
        return job

    probe = tmp_path / "mallory-code"
    probe.mkdir()
    (probe / "probe.py").write_text(CACHE_PROBE)
    m = submit({"name": "mallory", "nodes": 1, "procs_per_node": 1,
                "command": ["python3", "probe.py"], "max_restarts": 0,
                "env": {"PATH": "/usr/bin:/bin", "ENTRIES": ",".join(entries)}},
               c.make_token("user", user="mallory"), probe)
    s = c.wait_state(m, {"SUCCEEDED", "FAILED"}, timeout=120)
    assert s["state"] == "SUCCEEDED", (s["message"], c.logs(m, 0))
    results = dict(line.split()[1:3] for line in c.logs(m, 0).splitlines()
                   if line.startswith("RESULT "))
    assert len(results) == 7, c.logs(m, 0)
    wrong = {what: r for what, r in results.items() if r not in {"EACCES", "EPERM"}}
    assert not wrong, f"mallory's rank changed the data cache: {wrong}"
    assert {n: open(os.path.join(cache, n), "rb").read() for n in entries} == before

    carol = submit(dict(trainer_spec(name="carol", nodes=1, max_steps=20), max_restarts=0),
                   c.make_token("user", user="carol"))
    s = c.wait_state(carol, {"SUCCEEDED", "FAILED"}, timeout=180)
    assert s["state"] == "SUCCEEDED", (s["message"], c.logs(carol, 0))
    data = [line for line in c.logs(carol, 0).splitlines() if line.startswith("data: ")]
    assert data and data[0].count("cache hit") == 4, data
    assert job_uid(c, m) != job_uid(c, carol)


def write_fmnist_subset(dest, train=600, test=200, flip_labels=False):
    """A small Fashion-MNIST in `dest` (the first images of the real one, IDX gzip files)."""
    import gzip
    dest.mkdir(parents=True)
    src = "/usr/share/datasets/fashion-mnist"
    for split, n in (("train", train), ("t10k", test)):
        for kind, idx, item in (("images", "idx3", 784), ("labels", "idx1", 1)):
            name = f"{split}-{kind}-{idx}-ubyte.gz"
            with gzip.open(os.path.join(src, name), "rb") as f:
                head = bytearray(f.read(16 if kind == "images" else 8))
                body = bytearray(f.read(n * item))
            head[4:8] = n.to_bytes(4, "big")
            if flip_labels and kind == "labels":
                body = bytearray((9 - b) for b in body)
            with gzip.GzipFile(dest / name, "wb", mtime=0) as f:
                f.write(bytes(head) + bytes(body))


# Issue 45: data shipped in a job's code is cached by the worker under the SHA-256 of its
# bytes. Carol's and Dave's jobs ship the same data set: it is decompressed once and both read
# the one entry. Mallory ships other bytes under the same names: she reads her own entry, and
# the others' entries still hold exactly the decompression of the bytes their names say.
def test_shipped_data_is_decompressed_once_for_every_job(make_cluster, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("identities per job need a root worker; this test is not root")
    import gzip
    import hashlib
    c = make_cluster(workers=1, slots=1, secure=True)
    cache = os.path.join(c.dir, "w1", "data-cache", "shared")
    shared_code = tmp_path / "code"
    write_fmnist_subset(shared_code / "data")
    mallory_code = tmp_path / "mallory-code"
    write_fmnist_subset(mallory_code / "data", flip_labels=True)

    def run(name, code):
        spec = dict(trainer_spec(name=name, nodes=1, max_steps=10), max_restarts=0)
        spec["trainer"]["data_dir"] = "data"
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(spec))
        job = json.loads(c.cli("submit", str(path), "--output", "json", "--code", str(code),
                               token=c.make_token("user", user=name)).stdout)["job_id"]
        c.jobs.append(job)
        s = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=180)
        assert s["state"] == "SUCCEEDED", (s["message"], c.logs(job, 0))
        data = [line for line in c.logs(job, 0).splitlines() if line.startswith("data: ")]
        assert data and data[0].count("cache hit (by content") == 4, data
        return job

    def entries_of(code):
        out = {}
        for f in sorted((code / "data").iterdir()):
            raw = f.read_bytes()
            entry = os.path.join(cache, f.name[:-3] + ".sha256-" + hashlib.sha256(raw).hexdigest())
            out[entry] = gzip.decompress(raw)
        return out

    carol = run("carol", shared_code)
    dave = run("dave", shared_code)
    log = c.logs_of("w1")
    assert log.count("cached by content") == 4, "the shared data set was decompressed again"
    assert log.count("cache hit by content") >= 4, log
    run("mallory", mallory_code)
    assert c.logs_of("w1").count("cached by content") == 6, "mallory's two label files"
    for entry, want in {**entries_of(shared_code), **entries_of(mallory_code)}.items():
        with open(entry, "rb") as f:
            assert f.read() == want, f"{entry} does not hold what its name says"
        st = os.stat(entry)
        assert st.st_uid == os.geteuid() and st.st_mode & 0o022 == 0
    assert job_uid(c, carol) != job_uid(c, dave)

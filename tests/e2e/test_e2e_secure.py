"""The secure default end to end: a coordinator serving TLS with its own CA, workers joined
with a join token pinned by the CA's fingerprint (mutual TLS), people with tokens and roles
through the real CLI (README "Securing a cluster")."""
import os
import stat
import subprocess

from cluster import BIN, trainer_spec


def test_demo_path_over_tls_with_tokens_succeeds(make_cluster):
    c = make_cluster(workers=2, secure=True)
    alice = c.make_token("user", user="alice")
    r = c.cli("submit", _spec(c, trainer_spec(max_steps=60)), "--output", "json", token=alice)
    import json
    job = json.loads(r.stdout)["job_id"]
    c.jobs.append(job)
    done = c.wait_state(job, "SUCCEEDED", timeout=300)
    assert done["owner"] == "alice"
    assert "submitted by alice" in done["events"][0]["reason"]
    listed = c.cli("list", token=alice).stdout
    assert "alice" in listed.splitlines()[1]
    # Each worker keeps its key to itself (0600) in its work dir.
    for w in ("w1", "w2"):
        key = os.path.join(c.dir, w, "tls", "worker.key")
        assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    for key in ("ca.key", "server.key"):
        assert stat.S_IMODE(os.stat(os.path.join(c.dir, "state", "tls", key)).st_mode) == 0o600


def _spec(c, spec):
    import json
    path = os.path.join(c.dir, f"spec-{spec['name']}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def test_roles_ownership_revocation_and_exit_codes(make_cluster):
    c = make_cluster(workers=1, secure=True)
    alice = c.make_token("user", user="alice")
    bob = c.make_token("user", user="bob")
    viewer = c.make_token("viewer", user="vic")
    spec = _spec(c, {"name": "sleepy", "nodes": 1, "procs_per_node": 1,
                     "command": ["sleep", "300"]})
    job = c.cli("submit", spec, token=alice).stdout.strip()
    c.jobs.append(job)
    c.wait_state(job, "RUNNING")

    # No token, a malformed one: 6 with one line. A viewer submitting, bob cancelling or
    # reading alice's job: 7, naming the right.
    r = c.cli("list", check=False, token="cvy_nope")
    assert r.returncode == 6 and "not authenticated" in r.stderr and len(r.stderr.splitlines()) == 1
    r = c.cli("submit", spec, check=False, token=viewer)
    assert r.returncode == 7 and "jobs.submit" in r.stderr
    r = c.cli("cancel", job, check=False, token=bob)
    assert r.returncode == 7 and "jobs.cancel" in r.stderr
    r = c.cli("logs", job, check=False, token=bob)
    assert r.returncode == 7 and "logs.read" in r.stderr
    assert c.status(job)["state"] == "RUNNING"

    # Revocation takes effect on the next call, without a restart.
    assert c.cli("list", token=bob).returncode == 0
    c.admin("token", "revoke", "bob")
    r = c.cli("list", check=False, token=bob)
    assert r.returncode == 6 and "revoked" in r.stderr
    listed = c.admin("token", "list").stdout
    assert "bob" in listed and "revoked" in listed and bob.split(".")[1] not in listed

    # Only an admin drains: alice's job keeps running on the drained worker, a new job waits
    # until the worker is undrained.
    r = c.cli("drain", "w1", check=False, token=alice)
    assert r.returncode == 7 and "workers.drain" in r.stderr
    assert "DRAINED" in c.cli("drain", "w1").stdout
    assert "READY,DRAINED" in c.cli("workers", token=viewer).stdout
    quick = c.cli("submit", _spec(c, {"name": "quick", "nodes": 1, "procs_per_node": 1,
                                      "command": ["true"]}), token=alice).stdout.strip()
    c.jobs.append(quick)

    # The admin cancels alice's job; the event says who.
    c.cli("cancel", job)
    done = c.wait_state(job, "CANCELLED")
    assert any("cancelled by root" in e["reason"] for e in done["events"])
    assert c.status(quick)["state"] == "PENDING"
    c.cli("undrain", "w1")
    c.wait_state(quick, "SUCCEEDED")


def test_plain_text_and_foreign_clients_are_refused(make_cluster):
    c = make_cluster(workers=1, secure=True)
    # A plain-text client gets nowhere (and learns it needs TLS credentials: a usage error).
    r = subprocess.run([os.path.join(BIN, "convoy"), "--coordinator", c.target, "--insecure",
                        "list"], capture_output=True, text=True, timeout=60,
                       env={"HOME": c.dir, "PATH": os.environ["PATH"]})
    assert r.returncode == 2 and "speaks TLS" in r.stderr, r.stderr
    # --insecure daemons refuse non-loopback addresses.
    r = subprocess.run([os.path.join(BIN, "convoy-coordinator"), "--listen", "0.0.0.0:0",
                        "--insecure", "--state-dir", os.path.join(c.dir, "other")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "loopback" in r.stderr
    # A worker with the wrong fingerprint, or a used-up token, does not join.
    r = subprocess.run([os.path.join(BIN, "convoy-worker"), "--coordinator", c.target,
                        "--name", "intruder", "--work-dir", os.path.join(c.dir, "intruder"),
                        "--job-root", c.job_root, "--snapshot-dir", c.snapshot_dir("intruder"),
                        "--join-token", c.join_token,
                        "--ca-fingerprint", "SHA256:" + "ab" * 32],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "does not match --ca-fingerprint" in r.stderr
    # Join tokens are single-use by default; a worker started the README's way (the token in
    # CONVOY_JOIN_TOKEN, or --join-token-file) shows no secret in its command line.
    once = c.make_token("worker")
    token_file = os.path.join(c.dir, "join-token")
    with open(token_file, "w") as f:
        f.write(once + "\n")
    os.chmod(token_file, 0o600)
    x1 = c._spawn("x1", [os.path.join(BIN, "convoy-worker"), "--coordinator", c.target,
                         "--name", "x1", "--work-dir", os.path.join(c.dir, "x1"), "--cores", "1",
                         "--job-root", c.job_root, "--snapshot-dir", c.snapshot_dir("x1"),
                         "--join-token-file", token_file, "--ca-fingerprint", c.fingerprint])
    c.wait_workers_ready(2)
    with open(f"/proc/{x1.pid}/cmdline", "rb") as f:
        assert once.encode() not in f.read()
    r = subprocess.run([os.path.join(BIN, "convoy-worker"), "--coordinator", c.target,
                        "--name", "x2", "--work-dir", os.path.join(c.dir, "x2"),
                        "--job-root", c.job_root, "--snapshot-dir", c.snapshot_dir("x2"),
                        "--join-token", once, "--ca-fingerprint", c.fingerprint],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "used up" in r.stderr, r.stderr

"""The CLI's exit codes (README "Using it", `convoy --help`) through the real binary against a
real secure cluster, for each verb family: submit (with and without --code), the read verbs
(list, queue, status, watch, logs), cancel/delete, drain/undrain and workers.

  0/1 watch: the job SUCCEEDED / ended otherwise   2 usage error or invalid spec
  3 unreachable coordinator                        4 unknown job (or worker)
  5 another error from the coordinator             6 not authenticated
  7 permission denied

Also: `submit --watch` says why a job waits, and `convoy cancel J && convoy delete J` works
(delete waits for the ranks to stop)."""
import json
import os
import re
import select
import subprocess
import time

from cluster import BIN, free_port

WORKER = "w1"


def _run(c, *args, token=None, ca=True, target=None, timeout=60):
    """The CLI with exactly these credentials (none of the person's own config or
    environment)."""
    argv = [os.path.join(BIN, "convoy"), "--coordinator", target or c.target]
    if ca:
        argv += ["--ca", c.ca_path()]
    if token:
        argv += ["--token", token]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CONVOY_") and k != "XDG_CONFIG_HOME"}
    env["HOME"] = c.dir
    return subprocess.run(argv + list(args), capture_output=True, text=True, timeout=timeout,
                          env=env)


def _spec(c, name, spec):
    path = os.path.join(c.dir, f"spec-{name}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def _families(c, job):
    """Every verb family's calls that reach the coordinator, with `job` an existing job."""
    true_spec = _spec(c, "true", {"name": "true", "nodes": 1, "procs_per_node": 1,
                                  "command": ["/bin/true"]})
    code = os.path.join(c.dir, "code")
    os.makedirs(code, exist_ok=True)
    with open(os.path.join(code, "hello.txt"), "w") as f:
        f.write("hello\n")
    return {
        "submit": [("submit", true_spec), ("submit", "--code", code, "--", "/bin/true")],
        "read": [("list",), ("queue",), ("status", job), ("watch", job), ("logs", job),
                 ("plot", job)],
        "cancel/delete": [("cancel", job), ("delete", job)],
        "drain": [("drain", WORKER), ("undrain", WORKER)],
        "workers": [("workers",)],
    }


def _expect(c, code, calls, what, **creds):
    for args in calls:
        r = _run(c, *args, **creds)
        assert r.returncode == code, (
            f"{what}: convoy {' '.join(args)} exited {r.returncode}, not {code}: {r.stderr}")
        # One clear line (after --code's own report), never a raw gRPC log line.
        lines = [l for l in r.stderr.splitlines()
                 if not re.match(r"convoy: --code .* file\(s\)", l)]
        assert len(lines) >= 1 and all(l.startswith("convoy") or l.startswith("Run ")
                                       for l in lines), f"{what}: convoy {args}: {r.stderr!r}"
        assert "ssl_transport_security" not in r.stderr, r.stderr
    return True


def test_every_exit_code_for_every_verb_family(make_cluster):
    # At most one waiting job per user: a way to a refusal that is none of the others (5).
    c = make_cluster(workers=1, secure=True, coordinator_extra=["--max-queued-per-user", "1"])
    alice = c.make_token("user", user="alice")
    viewer = c.make_token("viewer", user="vic")
    worker_role = c.make_token("worker", user="wk")  # no jobs.read, no workers.read
    revoked = c.make_token("user", user="carol")
    c.admin("token", "revoke", "carol")

    job = _run(c, "submit", _spec(c, "done", {"name": "done", "nodes": 1, "procs_per_node": 1,
                                              "command": ["/bin/true"]}), token=alice)
    assert job.returncode == 0, job.stderr
    job = job.stdout.strip()
    c.jobs.append(job)
    c.wait_state(job, "SUCCEEDED")
    families = _families(c, job)
    every = [a for calls in families.values() for a in calls]

    # 0 and 1: watch by the job's end.
    assert _run(c, "watch", job, token=alice).returncode == 0
    sleeper = _run(c, "submit", _spec(c, "sleepy", {"name": "sleepy", "nodes": 1,
                                                    "procs_per_node": 1,
                                                    "command": ["sleep", "300"]}), token=alice)
    sleeper = sleeper.stdout.strip()
    c.jobs.append(sleeper)
    c.wait_state(sleeper, "RUNNING")

    # 2: usage errors and invalid specs, each family.
    bad_spec = _spec(c, "bad", {"name": "bad", "nodes": 0, "procs_per_node": 1,
                                "command": ["/bin/true"]})
    _expect(c, 2, [("submit", bad_spec), ("submit", "--code", os.path.join(c.dir, "nope"),
                                          "--", "/bin/true"), ("submit",)],
            "submit usage", token=alice)
    _expect(c, 2, [("list", "--state", "NOPE"), ("status",), ("watch",),
                   ("logs", job, "--rank", "7"), ("plot", job, "--metric", "nope")],
            "read usage", token=alice)
    _expect(c, 2, [("cancel",), ("delete",), ("delete", job, "extra")], "cancel/delete usage",
            token=alice)
    _expect(c, 2, [("drain",), ("undrain", WORKER, "--now")], "drain usage", token=c.token)
    _expect(c, 2, [("workers", "--limit", "0")], "workers usage", token=alice)
    r = _run(c, "frobnicate", token=alice)
    assert r.returncode == 2 and "queue" in r.stderr and "top" in r.stderr, r.stderr

    # 3: nobody listens there, with credentials and without.
    dead = f"127.0.0.1:{free_port()}"
    _expect(c, 3, every, "unreachable", token=alice, target=dead)
    _expect(c, 3, every, "unreachable, no credentials", ca=False, target=dead)

    # 4: an unknown job (or worker) in each family that names one.
    _expect(c, 4, [("status", "j-999999"), ("watch", "j-999999"), ("logs", "j-999999"),
                   ("plot", "j-999999")], "unknown job", token=alice)
    _expect(c, 4, [("cancel", "j-999999"), ("delete", "j-999999")], "unknown job", token=alice)
    _expect(c, 4, [("drain", "nosuch"), ("undrain", "nosuch")], "unknown worker", token=c.token)

    # 5: the coordinator refuses for another reason: alice's one waiting job is her quota
    # (with --code too, after the upload); a finished job cannot be cancelled, nor a running
    # one deleted. No read, drain or workers call has such a refusal.
    wide = _run(c, "submit", _spec(c, "wide", {"name": "wide", "nodes": 2, "procs_per_node": 1,
                                               "command": ["/bin/true"]}), token=alice)
    assert wide.returncode == 0, wide.stderr
    wide = wide.stdout.strip()
    c.jobs.append(wide)
    _expect(c, 5, families["submit"], "over the queued quota", token=alice)
    assert "quota" in _run(c, *families["submit"][1], token=alice).stderr
    _expect(c, 5, [("cancel", job)], "cancel of a finished job", token=alice)
    _expect(c, 5, [("delete", sleeper)], "delete of a running job", token=alice)

    # 6: not authenticated: no token and no CA (the CLI speaks plain text to loopback and
    # finds a TLS coordinator), a malformed, unknown or revoked token, a token without the CA.
    _expect(c, 6, every, "no token, no CA", ca=False)
    _expect(c, 6, every, "malformed token", token="cvy_nope")
    _expect(c, 6, every, "unknown token", token="cvy_0123456789abcdef.0123456789abcdef")
    _expect(c, 6, every, "revoked token", token=revoked)
    _expect(c, 6, every, "token without the CA", token=alice, ca=False)
    r = _run(c, "list", token=alice, ca=False)
    assert "certificate is not trusted" in r.stderr and "--ca" in r.stderr, r.stderr
    r = _run(c, "list", ca=False)
    assert "no token" in r.stderr, r.stderr

    # 7: valid tokens without the right, each family.
    _expect(c, 7, families["submit"], "viewer submits", token=viewer)
    _expect(c, 7, families["cancel/delete"], "viewer cancels", token=viewer)
    _expect(c, 7, families["drain"], "a user drains", token=alice)
    _expect(c, 7, [("logs", job)], "viewer reads logs", token=viewer)
    _expect(c, 7, [a for a in families["read"] if a[0] != "logs"] + families["workers"],
            "a worker's token reads", token=worker_role)
    r = _run(c, "submit", "--code", os.path.join(c.dir, "code"), "--", "/bin/true",
             token=viewer)
    assert "jobs.submit" in r.stderr, r.stderr

    # --insecure to a TLS coordinator is a usage error that says so.
    r = _run(c, "--insecure", "list", ca=False)
    assert r.returncode == 2 and "speaks TLS" in r.stderr, r.stderr

    # Nothing above touched the sleeper or the worker.
    assert c.status(sleeper)["state"] == "RUNNING"
    assert [w["state"] for w in c.workers()] == ["WORKER_READY"]
    c.cli("cancel", sleeper)
    c.cli("cancel", wide)


def test_submit_watch_says_why_and_cancel_then_delete_waits_for_the_ranks(make_cluster):
    c = make_cluster(workers=1, secure=True, kill_grace_ms=3000)
    alice = c.make_token("user", user="alice")

    # Two nodes on a one-worker cluster: `submit --watch` says why it waits.
    wide = _spec(c, "wide", {"name": "wide", "nodes": 2, "procs_per_node": 1,
                             "command": ["/bin/true"]})
    argv = [os.path.join(BIN, "convoy"), "--coordinator", c.target, "--ca", c.ca_path(),
            "--token", alice, "submit", wide, "--watch"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVOY_")}
    env["HOME"] = c.dir
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = b""
    try:
        deadline = time.time() + 20
        while time.time() < deadline and b"waiting: " not in out:
            # Raw reads: a buffered readline could hold the awaited line while select waits.
            ready, _, _ = select.select([p.stdout], [], [], 0.5)
            if ready:
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
    finally:
        p.terminate()
        p.wait(timeout=10)
        p.stdout.close()
    seen = out.decode(errors="replace").splitlines()
    wide_job = seen[0].strip() if seen else ""
    if wide_job:
        c.jobs.append(wide_job)
    waiting = [l for l in seen if "waiting: " in l]
    assert waiting, f"no reason shown: {seen}"
    queue = _run(c, "queue", token=alice).stdout
    assert "needs 2 workers" in waiting[0] and waiting[0].endswith(" (#1 in the queue)"), waiting
    # The same words as `convoy queue` (nothing changed in between).
    reason = waiting[0].split("waiting: ", 1)[1][:-len(" (#1 in the queue)")]
    assert wide_job in queue and reason in queue, (reason, queue)
    assert _run(c, "cancel", wide_job, token=alice).returncode == 0

    # A rank that ignores SIGTERM keeps its attempt being stopped for the kill grace (3 s):
    # `cancel J && delete J` still deletes, after saying that it waits.
    stubborn = _spec(c, "stubborn", {"name": "stubborn", "nodes": 1, "procs_per_node": 1,
                                     "command": ["sh", "-c", "trap '' TERM; sleep 300"]})
    job = _run(c, "submit", stubborn, token=alice).stdout.strip()
    c.jobs.append(job)
    c.wait_state(job, "RUNNING")
    time.sleep(0.5)  # the trap is set
    r = subprocess.run(["sh", "-c", '"$@" cancel "$J" && "$@" delete "$J"', "sh",
                        os.path.join(BIN, "convoy"), "--coordinator", c.target, "--ca",
                        c.ca_path(), "--token", alice],
                       capture_output=True, text=True, timeout=90, env={**env, "J": job})
    assert r.returncode == 0, r.stderr
    assert f"{job} CANCELLED" in r.stdout and f"{job} deleted" in r.stdout, r.stdout
    assert "waiting for the ranks of attempt 0 to stop" in r.stderr, r.stderr
    assert _run(c, "status", job, token=alice).returncode == 4
    assert not c.job_pids(job)

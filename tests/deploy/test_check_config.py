"""--check-config validates a whole configuration without starting anything: exit 0 with
"configuration OK", or 1 with the reason; nothing is created, no port is opened."""
import os
import socket

from deploy_util import BIN, free_port, run

COORDINATOR = os.path.join(BIN, "convoy-coordinator")
WORKER = os.path.join(BIN, "convoy-worker")


def check(binary, tmp_path, yaml_text, *flags, env=None):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text)
    e = {"PATH": os.environ["PATH"]}
    e.update(env or {})
    return run([binary, "--config", str(cfg), "--check-config", *flags], env=e)


def test_coordinator_ok_creates_nothing(tmp_path):
    port = free_port()
    r = check(COORDINATOR, tmp_path, f"listen: 127.0.0.1:{port}\nstate_dir: {tmp_path}/state\n"
              f"health_listen: ':{free_port()}'\n")
    assert r.returncode == 0 and "configuration OK" in r.stdout, r.stdout + r.stderr
    assert not os.path.exists(tmp_path / "state")  # nothing made
    with socket.socket() as s:  # nothing listening
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_coordinator_errors_name_the_problem(tmp_path):
    (tmp_path / "file").write_text("x")
    cases = [
        (f"state_dir: {tmp_path}/file/state\n", "--state-dir"),
        ("listen: nowhere\n", "--listen"),
        ("tls_cert: /nonexistent.crt\ntls_key: /nonexistent.key\ntls_ca: /nonexistent.ca\n"
         f"state_dir: {tmp_path}/s\n", "nonexistent"),
        ("tls_cert: /x.crt\n", "go together"),
        ("log_level: loud\n", "log-level"),
        ("worker_timeout: abc\n", "worker-timeout"),
    ]
    for text, reason in cases:
        r = check(COORDINATOR, tmp_path, text)
        assert r.returncode != 0, text
        assert reason in r.stdout + r.stderr, (text, r.stdout + r.stderr)


def test_coordinator_flag_overrides_the_file(tmp_path):
    r = check(COORDINATOR, tmp_path, "listen: nowhere\n", "--listen", f"127.0.0.1:{free_port()}",
              "--state-dir", str(tmp_path / "s"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_worker_ok_and_errors(tmp_path):
    base = (f"coordinator: 127.0.0.1:7070\nname: w1\nwork_dir: {tmp_path}/work\n"
            f"job_root: {tmp_path}/jobs\ninsecure: true\n")
    r = check(WORKER, tmp_path, base)
    assert r.returncode == 0 and "configuration OK" in r.stdout, r.stdout + r.stderr
    assert not os.path.exists(tmp_path / "work")
    (tmp_path / "file").write_text("x")
    cases = [
        (base + "run_as: no-such-user-here\n", "no-such-user-here"),
        (base.replace(f"{tmp_path}/work", f"{tmp_path}/file/work"), "--work-dir"),
        (base + "trainer: /nonexistent/convoy-trainer\n", "--trainer"),
        (base.replace("name: w1\n", ""), "name"),
        (base + "slots: 0\n", "slots"),
        (base + "data_path: /a\nunknown_key: 1\n", "line 7: unknown key 'unknown_key'"),
    ]
    if os.geteuid() != 0:  # only a root worker switches users
        cases = cases[1:]
    for text, reason in cases:
        r = check(WORKER, tmp_path, text)
        assert r.returncode != 0, text
        assert reason in r.stdout + r.stderr, (text, r.stdout + r.stderr)
    # The environment fills what the file leaves out (the units set CONVOY_WORKER_NAME).
    r = check(WORKER, tmp_path, base.replace("name: w1\n", ""), env={"CONVOY_WORKER_NAME": "w2"})
    assert r.returncode == 0, r.stdout + r.stderr

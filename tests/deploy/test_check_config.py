"""--check-config validates a whole configuration without starting anything (deploy/README.md
"Config files, checks, versions"): exit 0 with "configuration OK", or exit 1 with one
"configuration error: <reason>" line per problem, every problem at once; nothing is created,
no port is opened. Without --check-config the same mistakes are usage errors (exit 2)."""
import os
import shutil
import socket
import stat
import tempfile

import pytest

from deploy_util import BIN, free_port, run

COORDINATOR = os.path.join(BIN, "convoy-coordinator")
WORKER = os.path.join(BIN, "convoy-worker")
FINGERPRINT = "SHA256:" + "ab" * 32


def check(binary, tmp_path, yaml_text, *flags, env=None, check_config=True):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text)
    e = {"PATH": os.environ["PATH"]}
    e.update(env or {})
    argv = [binary, "--config", str(cfg), *flags]
    if check_config:
        argv.append("--check-config")
    return run(argv, env=e)


def errors_of(r):
    """The configuration errors of a failed check, asserting the documented form."""
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert lines, out
    for l in lines:  # nothing else on stderr: no CLI11 hint, no log line
        assert l.startswith("configuration error: "), out
    assert "configuration OK" not in out
    return [l[len("configuration error: "):] for l in lines]


def assert_one_error(r, reason):
    errors = errors_of(r)
    assert any(reason in e for e in errors), (reason, errors)


def test_coordinator_ok_creates_nothing(tmp_path):
    port = free_port()
    r = check(COORDINATOR, tmp_path, f"listen: 127.0.0.1:{port}\nstate_dir: {tmp_path}/state\n"
              f"health_listen: ':{free_port()}'\n")
    assert r.returncode == 0 and "configuration OK" in r.stdout, r.stdout + r.stderr
    assert not os.path.exists(tmp_path / "state")  # nothing made
    assert sorted(os.listdir(tmp_path)) == ["c.yaml"]  # the writability probe is gone
    with socket.socket() as s:  # nothing listening
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_coordinator_each_problem_is_a_configuration_error(tmp_path):
    (tmp_path / "file").write_text("x")
    state = f"state_dir: {tmp_path}/s\n"
    cases = [
        (f"state_dir: {tmp_path}/file/state\n", "--state-dir"),
        ("state_dir: /proc/nope\n", "--state-dir /proc/nope"),
        (state + "listen: nowhere\n", "--listen"),
        (state + "listen: 127.0.0.1:99999\n", "--listen"),
        ("tls_cert: /nonexistent.crt\ntls_key: /nonexistent.key\ntls_ca: /nonexistent.ca\n"
         + state, "nonexistent"),
        (state + "tls_cert: /x.crt\n", "go together"),
        (state + "log_level: loud\n", "log-level"),
        (state + "worker_timeout: abc\n", "worker-timeout"),
        (state + "worker_timeout: ten\n", "line 2: "),
        (state + "leader_lease: 1\n", "--leader-lease"),
        (state + "leader_lease: 2h\n", "--leader-lease"),
        (state + "leader_lease: 10\n", "--leader-lease needs --store etcd"),  # SQLite: no leader
        (state + "listn: 127.0.0.1:7070\n", "line 2: unknown key 'listn'"),
        (state + "listen: [127.0.0.1:7070\n", "c.yaml: line "),  # not YAML
    ]
    for text, reason in cases:
        assert_one_error(check(COORDINATOR, tmp_path, text), reason)
    r = run([COORDINATOR, "--config", str(tmp_path / "missing.yaml"), "--check-config"])
    assert_one_error(r, "missing.yaml")
    r = run([COORDINATOR, "--state-dir", str(tmp_path / "s"), "--listen", "127.0.0.1:99999",
             "--check-config"])
    assert_one_error(r, "--listen")


def test_coordinator_reports_every_problem_at_once(tmp_path):
    r = check(COORDINATOR, tmp_path,
              "state_dir: /proc/nope\nlistn: x\nworker_timeout: ten\nlisten: 127.0.0.1:99999\n"
              "metrics_listen: nowhere\n")
    errors = errors_of(r)
    assert len(errors) == 5, errors
    for reason in ("--state-dir /proc/nope", "line 2: unknown key 'listn'", "line 3:",
                   "--listen", "--metrics-listen"):
        assert sum(reason in e for e in errors) == 1, (reason, errors)


def test_coordinator_flag_overrides_the_file(tmp_path):
    r = check(COORDINATOR, tmp_path, "listen: nowhere\n", "--listen", f"127.0.0.1:{free_port()}",
              "--state-dir", str(tmp_path / "s"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_without_check_config_they_are_usage_errors(tmp_path):
    for text in ("listn: x\n", "worker_timeout: ten\n", "listen: 127.0.0.1:99999\n", "a: [\n"):
        r = check(COORDINATOR, tmp_path, text + f"state_dir: {tmp_path}/s\n", check_config=False)
        assert r.returncode == 2, (text, r.stdout + r.stderr)
    r = run([COORDINATOR, "--config", str(tmp_path / "missing.yaml")])
    assert r.returncode == 2, r.stdout + r.stderr
    r = run([COORDINATOR, "token", "create", "--user", "alice", "--state-dir",
             str(tmp_path / "s")])
    assert r.returncode == 2 and "--role" in r.stderr, r.stdout + r.stderr
    assert not os.path.exists(tmp_path / "s")


def test_init_help_and_hint_name_the_state_dir(tmp_path):
    r = run([COORDINATOR, "init", "--help"])
    assert r.returncode == 0 and "--state-dir" in r.stdout, r.stdout + r.stderr
    r = run([COORDINATOR, "token", "create", "--help"])
    assert r.returncode == 0 and "--state-dir" in r.stdout and "--role" in r.stdout
    state = tmp_path / "my state"
    r = run([COORDINATOR, "init", "--state-dir", str(state)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("SHA256:")
    assert f"token create --state-dir '{state}' --role worker" in r.stderr, r.stderr


@pytest.fixture
def tmp(tmp_path):
    """A scratch directory that a root worker's ranks (--run-as convoy) can reach: pytest's
    own is under a 0700 /tmp/pytest-of-USER, which --check-config rightly refuses."""
    d = tempfile.mkdtemp(prefix="convoy-check-config-")
    os.chmod(d, 0o711)
    yield type(tmp_path)(d)
    shutil.rmtree(d)


def worker_base(tmp_path, secure=False):
    # /bin/true as the trainer: these checks need no LibTorch build.
    text = (f"coordinator: 127.0.0.1:7070\nname: w1\nwork_dir: {tmp_path}/work\n"
            f"job_root: {tmp_path}/jobs\ntrainer: /bin/true\n")
    return text if secure else text + "insecure: true\n"


def test_worker_ok_and_errors(tmp):
    tmp_path = tmp
    base = worker_base(tmp_path)
    r = check(WORKER, tmp_path, base)
    assert r.returncode == 0 and "configuration OK" in r.stdout, r.stdout + r.stderr
    assert not os.path.exists(tmp_path / "work")
    (tmp_path / "file").write_text("x")
    cases = [
        (base + "run_as: no-such-user-here\n", "no-such-user-here"),
        (base.replace(f"{tmp_path}/work", f"{tmp_path}/file/work"), "--work-dir"),
        (base.replace(f"{tmp_path}/work", "/proc/nope"), "--work-dir /proc/nope"),
        (base.replace(f"{tmp_path}/jobs", "/proc/nope"), "--job-root /proc/nope"),
        (base.replace("/bin/true", "/nonexistent/convoy-trainer"), "--trainer"),
        (base.replace("name: w1\n", ""), "name"),
        (base + "slots: 0\n", "slots"),
        (base + "data_path: /a\nunknown_key: 1\n", "line 8: unknown key 'unknown_key'"),
        # Job directories must never hold the worker's own directories, nor lie in them.
        (base.replace(f"{tmp_path}/jobs", f"{tmp_path}/work/jobs"), "own directory"),
        (base.replace(f"{tmp_path}/jobs", f"{tmp_path}/work/run/x"), "own directory"),
        (base.replace(f"{tmp_path}/jobs", f"{tmp_path}/work"), "holds the worker's own"),
        (base.replace(f"{tmp_path}/jobs", f"{tmp_path}"), "holds the worker's own"),
    ]
    if os.geteuid() != 0:  # only a root worker switches users
        cases = cases[1:]
    for text, reason in cases:
        assert_one_error(check(WORKER, tmp_path, text), reason)
    # The environment fills what the file leaves out (the units set CONVOY_WORKER_NAME).
    r = check(WORKER, tmp_path, base.replace("name: w1\n", ""), env={"CONVOY_WORKER_NAME": "w2"})
    assert r.returncode == 0, r.stdout + r.stderr
    # A job root inside the work dir but apart from the worker's directories is fine.
    r = check(WORKER, tmp_path, base.replace(f"{tmp_path}/jobs", f"{tmp_path}/work/job-root"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_worker_credentials_as_the_start_decides(tmp):
    tmp_path = tmp
    base = worker_base(tmp_path, secure=True)
    # Neither a join token nor certificates: the daemon would exit "no credentials".
    assert_one_error(check(WORKER, tmp_path, base), "no credentials")
    assert_one_error(check(WORKER, tmp_path, base + f"ca_fingerprint: {FINGERPRINT}\n"),
                     "no credentials")
    # A join token (file or environment) with a well-formed fingerprint will do.
    for fp in (FINGERPRINT, "SHA256:" + ":".join(["AB"] * 32)):
        r = check(WORKER, tmp_path, base + f"join_token: t\nca_fingerprint: '{fp}'\n")
        assert r.returncode == 0, (fp, r.stdout + r.stderr)
    r = check(WORKER, tmp_path, base + f"ca_fingerprint: {FINGERPRINT}\n",
              env={"CONVOY_JOIN_TOKEN": "t"})
    assert r.returncode == 0, r.stdout + r.stderr
    for fp in ("SHA256:abcd", "ab" * 32, "SHA256:" + "xy" * 32, "MD5:" + "ab" * 32):
        assert_one_error(check(WORKER, tmp_path, base + f"join_token: t\nca_fingerprint: {fp}\n"),
                         "--ca-fingerprint")
    assert_one_error(check(WORKER, tmp_path, base + "join_token: t\n"), "--ca-fingerprint")


def test_worker_reports_every_problem_at_once(tmp):
    tmp_path = tmp
    text = (worker_base(tmp_path, secure=True).replace(f"{tmp_path}/jobs", f"{tmp_path}/work/jobs")
            + "metrics_listen: ':99999'\nslots: many\nlabl: zone=a\n")
    errors = errors_of(check(WORKER, tmp_path, text))
    for reason in ("no credentials", "own directory", "--metrics-listen", "line 7:",
                   "unknown key 'labl'"):
        assert sum(reason in e for e in errors) == 1, (reason, errors)
    assert len(errors) == 5, errors


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker runs ranks as another user")
def test_worker_job_root_the_ranks_cannot_reach(tmp):
    tmp_path = tmp
    # The quick start's mistake: the job root under the coordinator's 0700 state directory.
    private = tmp_path / "state"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    text = worker_base(tmp_path).replace(f"{tmp_path}/jobs", f"{private}/jobs") + \
        "run_as: nobody\n"
    errors = errors_of(check(WORKER, tmp_path, text))
    assert len(errors) == 1 and "cannot reach" in errors[0] and str(private) in errors[0], errors
    os.chmod(private, 0o711)  # searchable, not listable: fine
    r = check(WORKER, tmp_path, text)
    assert r.returncode == 0, r.stdout + r.stderr
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o711

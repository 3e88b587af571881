"""The systemd units as shipped: `systemd-analyze verify` accepts them, and the daemons
started exactly as the units start them (ExecStart, User, Environment/EnvironmentFile,
StateDirectory, CapabilityBoundingSet, NoNewPrivileges, the worker drop-in; PID 1 is not
systemd here, so tests/deploy/systemd_unit.py plays its part) with the example configs form a
secure cluster that trains a job to SUCCEEDED. Only paths move: /usr/bin is the build's
bin/, /etc/convoy and /var/lib are under a temp dir, and the ports are free ones."""
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

from deploy_util import BIN, DEPLOY, ROOT, free_port, run
import systemd_unit

sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from cluster import trainer_spec, wait_for  # noqa: E402

UNITS = os.path.join(DEPLOY, "systemd")
DROP_IN = os.path.join(UNITS, "convoy-worker.service.d", "coordinator.conf.example")


def test_systemd_analyze_verify(tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    # The units name /usr/bin/convoy-*; verify checks that ExecStart is executable, so point
    # it at the build's binaries (nothing else changes).
    paths = []
    for name in ("convoy-coordinator.service", "convoy-worker.service"):
        with open(os.path.join(UNITS, name)) as f:
            text = f.read().replace("/usr/bin/", BIN + "/")
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    dropin_dir = tmp_path / "convoy-worker.service.d"
    dropin_dir.mkdir()
    shutil.copy(DROP_IN, dropin_dir / "coordinator.conf")
    r = run(["systemd-analyze", "verify", "--man=no", *paths], cwd=tmp_path)
    # Any complaint (an unknown key is only a warning) fails the test.
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr


HA = os.path.join(UNITS, "ha")
# Debian's etcd-server unit, which deploy/systemd/ha/etcd.service.d/ adjusts.
ETCD_UNIT = "/lib/systemd/system/etcd.service"


def test_ha_drop_ins_verify(tmp_path):
    """deploy/systemd/ha's drop-ins, on the coordinator's unit and on Debian's etcd.service:
    `systemd-analyze verify` accepts them (an unknown key is a complaint too)."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    with open(os.path.join(UNITS, "convoy-coordinator.service")) as f:
        text = f.read().replace("/usr/bin/", BIN + "/")
    (tmp_path / "convoy-coordinator.service").write_text(text)
    paths = [str(tmp_path / "convoy-coordinator.service")]
    if os.path.exists(ETCD_UNIT):
        shutil.copy(ETCD_UNIT, tmp_path / "etcd.service")
        paths.append(str(tmp_path / "etcd.service"))
    for unit in ("convoy-coordinator.service", "etcd.service"):
        shutil.copytree(os.path.join(HA, unit + ".d"), tmp_path / (unit + ".d"))
    r = run(["systemd-analyze", "verify", "--man=no", *paths], cwd=tmp_path)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    if not os.path.exists(ETCD_UNIT):
        pytest.skip(f"{ETCD_UNIT} is not there (Debian's etcd-server): its drop-in not verified")


def _env_file(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                out[key] = value
    return out


def test_ha_etcd_settings_and_coordinator_config_agree():
    """deploy/systemd/ha/etcd.default.example names only settings etcd has (each ETCD_X is its
    --x), is one member of the cluster it lists, with the request size Convoy needs and TLS on
    both ports; coordinator.yaml.example names only keys the coordinator has and those
    members' client URLs as its store."""
    etcd = _env_file(os.path.join(HA, "etcd.default.example"))
    if shutil.which("etcd"):
        flags = set(re.findall(r"--([a-z0-9-]+)", run(["etcd", "--help"]).stdout))
        for key in etcd:
            assert key.startswith("ETCD_") and key[5:].lower().replace("_", "-") in flags, key
    cluster = dict(m.split("=", 1) for m in etcd["ETCD_INITIAL_CLUSTER"].split(","))
    assert len(cluster) == 3
    assert cluster[etcd["ETCD_NAME"]] == etcd["ETCD_INITIAL_ADVERTISE_PEER_URLS"]
    assert etcd["ETCD_INITIAL_CLUSTER_STATE"] == "new"
    assert int(etcd["ETCD_MAX_REQUEST_BYTES"]) >= 8388608
    assert etcd["ETCD_CLIENT_CERT_AUTH"] == "true" and etcd["ETCD_PEER_CLIENT_CERT_AUTH"] == "true"
    for url in etcd["ETCD_LISTEN_CLIENT_URLS"].split(",") + [etcd["ETCD_LISTEN_PEER_URLS"]]:
        assert url.startswith("https://"), url

    with open(os.path.join(HA, "coordinator.yaml.example")) as f:
        config = yaml.safe_load(f)
    keys = set(re.findall(r"^\| `(\w+)`", run([os.path.join(BIN, "convoy-coordinator"),
                                                "--print-config-keys"]).stdout, re.M))
    assert keys and set(config) <= keys, set(config) - keys
    # Each member's client URL is its peer URL's host on the client port.
    members = sorted(u.replace("https://", "").replace(":2380", ":2379") for u in cluster.values())
    assert etcd["ETCD_ADVERTISE_CLIENT_URLS"] == "https://" + members[0]
    assert config["store"].startswith("etcd://")
    assert sorted(config["store"][len("etcd://"):].split(",")) == members
    assert all(config.get(k) for k in ("etcd_ca", "etcd_cert", "etcd_key"))


def test_units_as_written_train_a_job():
    if os.geteuid() != 0:
        pytest.skip("starting the units' command lines needs root (User=convoy, User=root)")
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    top = tempfile.mkdtemp(prefix="convoy-units-")
    os.chmod(top, 0o755)  # the convoy user reaches its state and the jobs below
    etc = os.path.join(top, "etc", "convoy")
    var_lib = os.path.join(top, "var", "lib")
    os.makedirs(etc)
    os.makedirs(var_lib)
    for d in (os.path.join(top, "etc"), etc, os.path.join(top, "var"), var_lib):
        os.chmod(d, 0o755)
    port, metrics, worker_metrics = free_port(), free_port(), free_port()

    def path_map(p):
        for real, here in (("/usr/bin/", BIN + "/"), ("/etc/convoy/", etc + "/"),
                           ("/var/lib/", var_lib + "/")):
            if p.startswith(real):
                return here + p[len(real):]
        return p

    # The example configs, with paths under the temp dir and free ports.
    for name in ("coordinator.yaml", "worker.yaml"):
        with open(os.path.join(DEPLOY, "config", name)) as f:
            text = f.read()
        text = text.replace("/var/lib/", var_lib + "/").replace("0.0.0.0:7070", f"0.0.0.0:{port}")
        text = text.replace('":9464"', f'":{metrics}"').replace('":9465"', f'":{worker_metrics}"')
        if name == "worker.yaml":
            # Snapshots in the test's own directory: the default /dev/shm/convoy-HOSTNAME is
            # shared with every worker of that name on this machine (issue 26).
            text += f"\nsnapshot_dir: {top}/shm\n"
        with open(os.path.join(etc, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(etc, name), 0o644)

    coord_unit = systemd_unit.parse_unit(os.path.join(UNITS, "convoy-coordinator.service"))
    systemd_unit.make_state_directories(coord_unit, var_lib)
    procs = {}
    notify_path = os.path.join(top, "notify.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    os.chmod(notify_path, 0o777)  # the coordinator runs as convoy
    notify.settimeout(60)
    try:
        # The operator's first steps (deploy/README.md), as the coordinator's user and with
        # its config: the CA, a join token, an admin token.
        admin = systemd_unit.command(coord_unit, path_map)
        env = systemd_unit.environment(coord_unit, path_map)

        def coordinator_admin(*args):
            r = run(admin + list(args), env=env)
            assert r.returncode == 0, r.stderr
            return r.stdout.strip()
        fingerprint = coordinator_admin("init")
        assert fingerprint.startswith("SHA256:"), fingerprint
        join_token = coordinator_admin("token", "create", "--role", "worker")
        admin_token = coordinator_admin("token", "create", "--role", "admin", "--user", "root")

        assert systemd_unit.one(coord_unit, "Type") == "notify"
        procs["coordinator"] = systemd_unit.start(
            coord_unit, path_map, os.path.join(top, "coordinator.log"),
            {"NOTIFY_SOCKET": notify_path,
             "WATCHDOG_USEC": str(_seconds(systemd_unit.one(coord_unit, "WatchdogSec")) * 10**6)})
        # systemd starts what is ordered after it once READY=1 arrives.
        assert "READY=1" in notify.recv(4096).decode()

        # The worker: its unit, the drop-in pointing it at this coordinator, the token file.
        with open(DROP_IN) as f:
            dropin = f.read()
        dropin = dropin.replace("coordinator.example.net:7070", f"127.0.0.1:{port}")
        dropin = dropin.replace("SHA256:" + "0" * 64, fingerprint)
        assert fingerprint in dropin and f"127.0.0.1:{port}" in dropin
        dropin_path = os.path.join(top, "coordinator.conf")
        with open(dropin_path, "w") as f:
            f.write(dropin)
        env_file = os.path.join(etc, "worker.env")
        with open(env_file, "w") as f:
            f.write(f"CONVOY_JOIN_TOKEN={join_token}\n")
        os.chmod(env_file, 0o600)
        worker_unit = systemd_unit.parse_unit(os.path.join(UNITS, "convoy-worker.service"),
                                              dropin_path)
        systemd_unit.make_state_directories(worker_unit, var_lib)
        assert systemd_unit.one(worker_unit, "KillMode") == "mixed"
        procs["worker"] = systemd_unit.start(worker_unit, path_map, os.path.join(top, "worker.log"))

        def cli(*args):
            r = run([os.path.join(BIN, "convoy"), "--coordinator", f"127.0.0.1:{port}",
                     "--ca", os.path.join(var_lib, "convoy", "tls", "ca.crt"),
                     "--token", admin_token, *args],
                    env={"PATH": os.environ["PATH"], "HOME": top})
            return r

        def ready():
            r = cli("workers", "--output", "json")
            return r.returncode == 0 and any(
                w["state"] == "WORKER_READY" for w in json.loads(r.stdout).get("workers", []))
        wait_for(ready, 60, "the worker to join")
        # Its readiness, as a probe would see it: registered with the coordinator.
        assert _http(worker_metrics, "/healthz") == 200
        wait_for(lambda: _http(worker_metrics, "/readyz") == 200, 30, "the worker's /readyz")

        spec = trainer_spec(name="units", nodes=1, max_steps=20)
        spec_path = os.path.join(top, "spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        r = cli("submit", spec_path, "--output", "json")
        assert r.returncode == 0, r.stderr
        job = json.loads(r.stdout)["job_id"]

        def finished_job(job):
            r = cli("status", job, "--output", "json")
            if r.returncode != 0:
                return None
            state = json.loads(r.stdout)["state"]
            return state if state in ("SUCCEEDED", "FAILED", "CANCELLED") else None
        state = wait_for(lambda: finished_job(job), 300, f"job {job} to finish", interval=0.5)
        assert state == "SUCCEEDED", cli("status", job).stdout + _logs(top)
        # With only the unit's capabilities (no CAP_FOWNER) the worker still gave the ranks
        # their metrics socket and snapshot directory: it sets a mode before it gives a file
        # away, never after.
        with open(os.path.join(top, "worker.log"), errors="replace") as f:
            worker_log = f.read()
        for warning in ("no metrics socket", "no snapshot directory", "cannot create"):
            assert warning not in worker_log, worker_log[-4000:]
        latest = json.loads(cli("status", job, "--output", "json").stdout).get("latest", [])
        assert latest, "no metric reached the coordinator"
        # A job runs as an identity of its own (run_as: pool), never the daemons' `convoy`,
        # and reaches none of the coordinator's state or the worker's key.
        secrets = [os.path.join(var_lib, "convoy", "tls", "ca.key"),
                   os.path.join(var_lib, "convoy", "tls", "server.key"),
                   os.path.join(var_lib, "convoy", "convoy.db"),
                   os.path.join(var_lib, "convoy", "tokens.db"),
                   os.path.join(var_lib, "convoy-worker", "tls", "worker.key")]
        assert all(os.path.exists(p) for p in secrets), [p for p in secrets if not os.path.exists(p)]
        probe = {"name": "probe", "nodes": 1, "procs_per_node": 1, "max_restarts": 0,
                 "command": ["sh", "-c", "id -u; for f in " + " ".join(secrets) + "; do "
                             "if head -c1 \"$f\" >/dev/null 2>&1; then echo READ \"$f\"; "
                             "else echo DENIED \"$f\"; fi; done"]}
        with open(spec_path, "w") as f:
            json.dump(probe, f)
        probe_job = json.loads(cli("submit", spec_path, "--output", "json").stdout)["job_id"]
        wait_for(lambda: finished_job(probe_job), 60, "the probe job")
        out = cli("logs", probe_job, "--rank", "0").stdout.splitlines()
        daemons = {pwd.getpwnam("convoy").pw_uid, 0}
        assert int(out[0]) not in daemons and 61184 <= int(out[0]) <= 65519, out
        assert out[1:] == [f"DENIED {p}" for p in secrets], out

        # systemctl stop: SIGTERM to the main process (KillMode=mixed), then it exits.
        for name in ("worker", "coordinator"):
            procs[name].send_signal(signal.SIGTERM)
            assert procs[name].wait(timeout=90) == 0, _logs(top)
        assert "STOPPING=1" in "".join(_drain(notify))
        wait_for(lambda: not _ranks(job, top), 10, "no process of the job")
    finally:
        notify.close()
        for p in procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait(timeout=10)
        shutil.rmtree(top, ignore_errors=True)


def _ranks(job, top):
    """Live processes of `job` of this test's cluster (other clusters on this machine may
    number their jobs alike): its job id and this test's directory in their environment."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{entry}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, IndexError):
            continue
        if f"CONVOY_JOB_ID={job}\0".encode() in env + b"\0" and top.encode() in env and not zombie:
            pids.append(int(entry))
    return pids


def _http(port, path):
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def _seconds(text):
    assert text.endswith("s") and text[:-1].isdigit(), text
    return int(text[:-1])


def _drain(sock):
    sock.settimeout(0.5)
    out = []
    try:
        while True:
            out.append(sock.recv(4096).decode())
    except OSError:
        pass
    return out


def _logs(top):
    out = ""
    for name in ("coordinator.log", "worker.log"):
        try:
            with open(os.path.join(top, name), errors="replace") as f:
                out += f"\n--- {name}\n" + f.read()[-4000:]
        except OSError:
            pass
    return out

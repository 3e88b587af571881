"""Issue 30, "No single point of failure": two coordinators on one etcd (three real members,
Debian's etcd-server, started by the test on loopback ports), one of them leader; workers and
the CLI know both (--coordinator A,B). A kill -9 of the leader: the follower takes over, the
running job finishes SUCCEEDED without a new attempt, and every job submitted before the kill
is still listed."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from cluster import BIN, Cluster, free_port, trainer_spec, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from etcd_members import ETCD, EtcdMembers  # noqa: E402


class HACluster(Cluster):
    """Cluster with coordinators c1 and c2 on --store etcd://; the workers and the CLI are
    given both addresses. Secure (the default deployment): `init` makes the cluster CA in
    state/, which the operator copies to every coordinator's state dir; tokens are made in
    etcd (`token create --store etcd://...`)."""

    def ensure_etcd(self):
        if not hasattr(self, "etcd"):
            self.etcd = EtcdMembers(self.dir)
            # Coordinators dial a serving etcd (one started before its members were ready
            # could stay unable to reach them under load: see the closing note of stop 39).
            assert self.etcd.wait_healthy(), "etcd did not become healthy"
            self.ports = {"c1": free_port(), "c2": free_port()}
            self.target = ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def admin(self, *args):
        if args and args[0] == "token":
            self.ensure_etcd()
            args = (*args, "--store", self.etcd.url())
        return super().admin(*args)

    def start_coordinator(self):
        self.ensure_etcd()
        for name in self.ports:
            self.start_one(name)

    def state_dir(self, name):
        return os.path.join(self.dir, "state-" + name)

    def copy_cluster_ca(self, name):
        """What the operator does (deploy/README.md): the same CA on every coordinator."""
        tls = os.path.join(self.state_dir(name), "tls")
        os.makedirs(tls, mode=0o700, exist_ok=True)
        for f in ("ca.crt", "ca.key"):
            shutil.copy2(os.path.join(self.dir, "state", "tls", f), os.path.join(tls, f))

    def start_one(self, name, port=None):
        if self.secure:
            self.copy_cluster_ca(name)
        return self.spawn_coordinator(name, port or self.ports[name])

    def spawn_coordinator(self, name, port):
        return self._spawn(name, [
            os.path.join(BIN, "convoy-coordinator"), "--listen", f"127.0.0.1:{port}",
            "--state-dir", self.state_dir(name), "--store", self.etcd.url(),
            *([] if self.secure else ["--insecure"]), "--worker-timeout",
            str(self.worker_timeout), "--kill-grace-ms", str(self.kill_grace_ms)])

    def leader(self):
        leading = [n for n in self.ports if "this coordinator (" in self.logs_of(n)
                   and " leads (election key" in self.logs_of(n)
                   and self.procs[n].poll() is None]
        return leading[0] if len(leading) == 1 else None

    def close(self):
        leftovers = super().close() if os.path.isdir(self.dir) else {}
        if hasattr(self, "etcd"):
            self.etcd.close()
        return leftovers


@pytest.fixture
def ha_cluster(request):
    if not os.access(ETCD, os.X_OK):
        pytest.skip("etcd is not installed (Debian's etcd-server)")
    clusters = []

    def make(**kwargs):
        c = HACluster(**kwargs)
        clusters.append(c)
        return c
    yield make
    failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else False
    for c in clusters:
        if failed:
            c.print_logs([*c.procs, *(c.etcd.names if hasattr(c, "etcd") else [])], chars=2000)
        # Stop etcd first: the cluster's directory holds its data.
        if hasattr(c, "etcd"):
            c.etcd.close()
        leftovers = c.close()
        assert not leftovers, f"processes of jobs survived the test: {leftovers}"


def test_leader_kill_follower_takes_over_and_the_running_job_finishes(ha_cluster):
    c = ha_cluster(workers=2)
    leader = wait_for(c.leader, 30, "a leader")
    follower = "c2" if leader == "c1" else "c1"
    # The follower may still be waiting for etcd when the other already leads (a loaded CI
    # machine): it says whom it follows once it has reached etcd.
    wait_for(lambda: "following 127.0.0.1:" in c.logs_of(follower), 30,
             f"{follower} to say whom it follows")
    done = c.submit({"name": "quick", "nodes": 1, "procs_per_node": 1, "command": ["true"]})
    c.wait_state(done, "SUCCEEDED", timeout=60)
    job = c.submit(trainer_spec(max_steps=200))
    c.wait_state(job, "RUNNING", timeout=60)
    wait_for(lambda: any(int(m["step"]) > 10 for m in c.status(job)["latest"]), 60, "training")

    t_kill = time.time()
    c.signal(leader, signal.SIGKILL)
    # Submitted while no coordinator serves: `convoy submit` retries (with one request id)
    # until the new leader answers, and exactly one job is made.
    during = c.submit({"name": "during-failover", "nodes": 1, "procs_per_node": 1,
                       "command": ["true"]})
    wait_for(lambda: c.leader() == follower, 30, f"{follower} to lead")
    t_lead = time.time()
    wait_for(lambda: sum(w["state"] == "WORKER_READY" for w in c.workers()) == 2, 60,
             "both workers back")
    t_back = time.time()
    print(f"leader kill -9 -> {follower} leads: {t_lead - t_kill:.1f} s; "
          f"-> both workers back: {t_back - t_kill:.1f} s")

    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=300)
    assert st["state"] == "SUCCEEDED", st["message"]
    assert st["restarts"] == 0 and st["attempt"] == 0
    ids = [j["id"] for j in json.loads(c.cli("list", "--output", "json").stdout)["jobs"]]
    assert ids == [done, job, during]


def test_store_flags_are_checked_naming_the_flag(tmp_path):
    """--store etcd://... is checked before anything starts."""
    base = [os.path.join(BIN, "convoy-coordinator"), "--state-dir", str(tmp_path / "state"),
            "--listen", f"127.0.0.1:{free_port()}"]
    cases = [
        (["--store", "etcd://", "--insecure"], "--store: no etcd member"),
        (["--store", "etcd://127.0.0.1", "--insecure"], "is not HOST:PORT"),
        (["--store", "mysql://x:1", "--insecure"], "--store: expected etcd://HOST:PORT"),
        (["--store", "etcd://127.0.0.1:2379", "--insecure", "--etcd-prefix", "convoy"],
         "--etcd-prefix: 'convoy' must start and end with '/'"),
        (["--etcd-ca", "/x", "--insecure"], "--etcd-ca/--etcd-cert/--etcd-key need --store etcd"),
    ]
    for extra, message in cases:
        r = subprocess.run(base + extra, capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, (extra, r.returncode, r.stderr)
        assert message in r.stderr, (extra, r.stderr)


def test_a_paused_leader_is_deposed_and_never_writes_again(ha_cluster):
    """A leader that cannot renew its lease (SIGSTOP: as a partition from etcd looks to the
    others) loses it; the follower takes over; resumed, the old leader finds its lease gone
    and stops at once (crash-only), and nothing it held is written: there is never a second
    leader writing."""
    # The worker finds the new leader once its keepalive gives up on the stopped one (about
    # 10 s): the new leader must not count it lost before.
    c = ha_cluster(workers=1, worker_timeout=30)
    leader = wait_for(c.leader, 30, "a leader")
    follower = "c2" if leader == "c1" else "c1"
    job = c.submit({"name": "sleeper", "nodes": 1, "procs_per_node": 1,
                    "command": ["sleep", "1000"]})
    c.wait_state(job, "RUNNING", timeout=60)
    c.signal(leader, signal.SIGSTOP)
    wait_for(lambda: " leads (election key" in c.logs_of(follower), 30, f"{follower} to lead")
    c.signal(leader, signal.SIGCONT)
    # The old leader notices at its next renewal and exits 1.
    assert c.procs[leader].wait(timeout=30) == 1
    assert "this coordinator is no longer the leader" in c.logs_of(leader), \
        c.logs_of(leader)[-2000:]
    # The new leader serves the job it found running; a cancel through it is obeyed.
    c.cli("cancel", job)
    st = c.wait_state(job, {"CANCELLED"}, timeout=60)
    assert st["attempt"] == 0
    wait_for(lambda: not c.job_pids(job), 30, "the cancelled job's rank to be gone")


def test_check_config_reaches_etcd_and_knows_whose_prefix_it_is(ha_cluster, tmp_path):
    c = ha_cluster(workers=1)
    wait_for(c.leader, 30, "a leader")
    base = [os.path.join(BIN, "convoy-coordinator"), "--check-config", "--insecure",
            "--state-dir", str(tmp_path / "state"), "--store", c.etcd.url()]
    r = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "etcd prefix /convoy/ holds cluster " in r.stdout, r.stdout
    assert "etcd: 3 of 3 member(s) reached" in r.stdout, r.stdout
    # A prefix another program uses is refused; an unused one is a new cluster.
    subprocess.run(["etcdctl", "--endpoints", c.etcd.url()[len("etcd://"):], "put",
                    "/other/cluster-id", "not ours"], check=True, capture_output=True,
                   env={**os.environ, "ETCDCTL_API": "3"}, timeout=30)
    r = subprocess.run(base + ["--etcd-prefix", "/other/"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "the prefix is another program's" in r.stdout + r.stderr, \
        r.stdout + r.stderr
    r = subprocess.run(base + ["--etcd-prefix", "/fresh/"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "is unused" in r.stdout, r.stdout + r.stderr


def test_secure_group_shares_the_ca_and_the_tokens_across_a_failover(ha_cluster):
    """The secure default on etcd: tokens (hashes) and worker certificate records live in
    etcd, the CA is the operator's copy on every coordinator. Workers join and the CLI calls
    over TLS through whichever coordinator leads; after a kill -9 of the leader the same
    certificates and tokens work against the new one, a token made then works, and a revoked
    one stops working. A coordinator without the cluster's CA refuses to start."""
    c = ha_cluster(workers=2, secure=True)
    leader = wait_for(c.leader, 30, "a leader")
    follower = "c2" if leader == "c1" else "c1"
    wait_for(lambda: "following 127.0.0.1:" in c.logs_of(follower), 30,
             f"{follower} to say whom it follows")
    job = c.submit({"name": "sleeper", "nodes": 2, "procs_per_node": 1,
                    "command": ["sh", "-c", "sleep 12"]})
    c.wait_state(job, "RUNNING", timeout=60)

    c.signal(leader, signal.SIGKILL)
    wait_for(lambda: c.leader() == follower, 30, f"{follower} to lead")
    # The workers come back with the certificates the old leader issued (same CA).
    wait_for(lambda: sum(w["state"] == "WORKER_READY" for w in c.workers()) == 2, 60,
             "both workers back")
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=120)
    assert st["state"] == "SUCCEEDED" and st["attempt"] == 0, st

    viewer = c.make_token("viewer", user="vera")
    assert job in c.cli("list", token=viewer).stdout
    c.admin("token", "revoke", "vera")
    wait_for(lambda: c.cli("list", token=viewer, check=False).returncode != 0, 15,
             "the revoked token to be refused")
    refused = c.cli("list", token=viewer, check=False)
    assert "revoked" in refused.stderr, refused.stderr

    # The old leader's state dir holds the cluster CA; a new coordinator without it refuses
    # to make a second CA; one with another CA refuses to serve.
    lone = c.spawn_coordinator("c3", free_port())
    assert lone.wait(timeout=60) == 1
    assert "is not in " + c.state_dir("c3") + "/tls" in c.logs_of("c3"), c.logs_of("c3")
    subprocess.run([os.path.join(BIN, "convoy-coordinator"), "init", "--state-dir",
                    c.state_dir("c4")], check=True, capture_output=True, timeout=30)
    other = c.spawn_coordinator("c4", free_port())
    assert other.wait(timeout=60) == 1
    assert "is not this cluster's" in c.logs_of("c4"), c.logs_of("c4")
    # --check-config says the same before a start.
    def check(name):
        return subprocess.run([os.path.join(BIN, "convoy-coordinator"), "--check-config",
                               "--state-dir", c.state_dir(name), "--store", c.etcd.url(),
                               "--listen", f"127.0.0.1:{free_port()}"],
                              capture_output=True, text=True, timeout=60)
    r = check(follower)
    assert r.returncode == 0 and "(the one recorded in etcd)" in r.stdout, r.stdout + r.stderr
    r = check("c4")
    assert r.returncode == 1 and "is not this cluster's CA" in r.stdout + r.stderr, \
        r.stdout + r.stderr


def test_losing_etcd_members_stops_writes_saying_so_and_they_resume(ha_cluster):
    """One of three etcd members lost: nothing stops. Two: the leader cannot renew its lease
    and steps down, saying so; no coordinator leads or acknowledges anything, and the CLI
    says why it found none; with the members back, one leads again and changes are accepted.
    (A store that refuses writes while the lease holds, a full disk say, is refused at once
    with its reason: CoordinatorStoreTest.ChangesAreRefusedSayingWhyWhileTheStoreFails.)"""
    c = ha_cluster(workers=1)
    leader = wait_for(c.leader, 30, "a leader")
    c.etcd.kill(0)
    one = c.submit({"name": "one-member-down", "nodes": 1, "procs_per_node": 1,
                    "command": ["true"]})
    assert c.wait_state(one, "SUCCEEDED", timeout=60)["state"] == "SUCCEEDED"

    c.etcd.kill(1)
    # Without a quorum the leader cannot renew its lease: it steps down within seconds and
    # stops (crash-only), saying why, and no coordinator serves.
    assert c.procs[leader].wait(timeout=30) == 1
    assert "this coordinator is no longer the leader" in c.logs_of(leader), \
        c.logs_of(leader)[-2000:]
    spec = os.path.join(c.dir, "while-down.json")
    with open(spec, "w") as f:
        json.dump({"name": "while-down", "nodes": 1, "procs_per_node": 1, "command": ["true"]},
                  f)
    refused = c.cli("submit", spec, check=False, timeout=120)
    assert refused.returncode != 0, f"acknowledged without an etcd quorum: {refused.stdout}"
    assert "none of " + c.target + " serves" in refused.stderr, refused.stderr
    c.start_one(leader)  # as systemd restarts it: it waits for etcd
    wait_for(lambda: "leader election: etcd" in c.logs_of(leader).split(
        "this coordinator is no longer the leader")[-1] or
        "waiting for etcd" in c.logs_of(leader).split(
        "this coordinator is no longer the leader")[-1], 60, f"{leader} to wait for etcd")

    c.etcd.start(0)
    c.etcd.start(1)
    assert c.etcd.wait_healthy(60), "etcd did not come back"
    wait_for(lambda: c.etcd.get("/convoy/leader"), 60, "a leader again")
    after = c.submit({"name": "after", "nodes": 1, "procs_per_node": 1, "command": ["true"]})
    assert c.wait_state(after, "SUCCEEDED", timeout=60)["state"] == "SUCCEEDED"
    jobs = json.loads(c.cli("list", "--output", "json").stdout)["jobs"]
    names = [j["spec"]["name"] for j in jobs]
    assert "after" in names and "while-down" not in names, names

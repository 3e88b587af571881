"""`convoy worker forget` (issue 32): an admin removes a LOST worker's record for good, through
the real CLI against a secure cluster; a connected or unknown worker and a user's token are
refused with the README's exit codes."""
import signal

from cluster import wait_for


def _states(c):
    try:
        return {w["name"]: w["state"] for w in c.workers()}
    except AssertionError:
        return None  # the coordinator is not listening yet


def test_an_admin_forgets_a_lost_worker_for_good(make_cluster):
    c = make_cluster(workers=2, secure=True, worker_timeout=2)
    alice = c.make_token("user", user="alice")

    # Connected: refused (5), naming the worker and what to do; unknown: 4.
    r = c.cli("worker", "forget", "w2", check=False)
    assert r.returncode == 5 and "worker w2 is connected" in r.stderr, (r.returncode, r.stderr)
    r = c.cli("worker", "forget", "nobody", check=False)
    assert r.returncode == 4 and "nobody" in r.stderr, (r.returncode, r.stderr)

    c.signal("w2", signal.SIGKILL)
    wait_for(lambda: (_states(c) or {}).get("w2") == "WORKER_LOST", 30, "w2 LOST")
    assert "LOST" in c.cli("workers").stdout

    # Only an admin forgets (7, naming the right); then w2 is gone from `convoy workers`.
    r = c.cli("worker", "forget", "w2", check=False, token=alice)
    assert r.returncode == 7 and "workers.forget" in r.stderr, (r.returncode, r.stderr)
    assert "w2" in _states(c)
    r = c.cli("worker", "forget", "w2")
    assert "worker w2 forgotten" in r.stdout, r.stdout
    assert sorted(_states(c)) == ["w1"]
    assert "worker w2 forgotten by root" in c.logs_of("coordinator")

    # Gone after a coordinator restart too; forgetting it again: 4.
    c.restart_coordinator()
    wait_for(lambda: _states(c) is not None, 30, "the coordinator back")
    assert sorted(_states(c)) == ["w1"]
    r = c.cli("worker", "forget", "w2", check=False)
    assert r.returncode == 4, (r.returncode, r.stderr)

    # The same name joining again registers as new (its certificate was not revoked).
    c.start_worker("w2")
    wait_for(lambda: (_states(c) or {}).get("w2") == "WORKER_READY", 30, "w2 READY again")

    r = c.cli("worker", "forget", "--help")
    assert "convoy worker forget" in r.stdout.split("Example", 1)[1]

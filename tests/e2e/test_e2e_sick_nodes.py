"""Issue 42, "Faults follow the node" (README "When nodes are sick"): a node whose ranks of two
different jobs fail for the node's reasons is cordoned automatically with that reason, both
jobs finish elsewhere, and moving off the node uses none of their restarts. Admins cordon and
uncordon by hand; other users may not.

The sick node is worker w2: its ranks see CONVOY_E2E_SICK (the worker passes it with
--pass-env, no other worker has it), and the jobs' command fails there the way a full disk
fails a program: "No space left on device" on stderr and exit 1."""

import json
import urllib.request

from cluster import wait_for

SICK = ('if [ -n "$CONVOY_E2E_SICK" ]; then '
        'echo "writing the checkpoint: No space left on device" >&2; sleep 1; exit 1; fi; '
        'sleep 2; echo fine')


def _job(name):
    # max_restarts 0: a restart used would fail the job, so SUCCEEDED proves the move was free.
    return {"name": name, "nodes": 1, "procs_per_node": 1, "max_restarts": 0,
            "command": ["sh", "-c", SICK]}


def _worker(c, name):
    return next(w for w in c.workers() if w["name"] == name)


def _metric(c, name, labels):
    with urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_node_failing_two_jobs_is_cordoned_and_both_finish_elsewhere(make_cluster):
    c = make_cluster(workers=0, secure=True)
    # w2 first, with two slots: both jobs start there (most free slots, then by name).
    c.start_worker("w2", slots=2, extra=["--pass-env", "CONVOY_E2E_SICK"],
                   env={"CONVOY_E2E_SICK": "1"})
    c.start_worker("w3", slots=1)
    c.wait_workers_ready(2)
    a = c.submit(_job("a"))
    b = c.submit(_job("b"))
    for job in (a, b):
        st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)
        assert st["state"] == "SUCCEEDED", (job, st["message"], st["events"])
        assert st["restarts"] == 0 and st["node_moves"] == 1, st
        first = st["attempts"][0]
        assert first["failure"]["worker"] == "w2", first
        assert first["failure"]["origin"] == "FAILURE_ORIGIN_NODE", first["failure"]
        assert "No space left on device" in first["failure"]["origin_reason"]
        assert st["attempts"][-1]["nodes"][0]["worker"] == "w3", st["attempts"][-1]
        assert any("moving off w2, no restart used" in e["reason"] for e in st["events"])

    # The second job's failure cordoned w2, naming both jobs and the reason.
    w2 = _worker(c, "w2")
    assert w2["cordoned"] and w2["cordoned_by"] == "coordinator", w2
    assert a in w2["cordon_reason"] and b in w2["cordon_reason"], w2["cordon_reason"]
    assert "No space left on device" in w2["cordon_reason"], w2["cordon_reason"]
    assert len(w2["node_faults"]) == 2, w2
    table = c.cli("workers").stdout
    line = next(line for line in table.splitlines() if line.startswith("w2 "))
    assert "CORDONED" in line and "cordoned by coordinator" in line, table
    events = [e["reason"] for job in (a, b) for e in c.status(job)["events"]]
    assert any("worker w2 cordoned: ranks of 2 jobs failed here" in e for e in events), events
    # /metrics follows at the coordinator's next export.
    wait_for(lambda: _metric(c, "convoy_worker_cordoned", {"worker": "w2"}) == 1, 20,
             "convoy_worker_cordoned of w2 at 1")
    assert _metric(c, "convoy_worker_cordoned", {"worker": "w3"}) == 0

    # A cordoned node gets nothing new: a third job waits on w3 rather than going to w2.
    # Only an admin uncordons; a user may not.
    user = c.make_token("user", user="alice")
    r = c.cli("uncordon", "w2", token=user, check=False)
    assert r.returncode != 0 and "workers.cordon" in r.stderr, (r.returncode, r.stderr)
    r = c.cli("uncordon", "w2", "--output", "json")
    w2 = json.loads(r.stdout)
    assert not w2.get("cordoned") and not w2.get("node_faults"), w2
    # ... and cordons by hand, with a reason.
    r = c.cli("cordon", "w3", "--reason", "fan 2 is loud")
    assert "fan 2 is loud" in r.stdout, r.stdout
    assert _worker(c, "w3")["cordoned_by"] == "root"
    c.cli("uncordon", "w3")
    assert not _worker(c, "w3").get("cordoned")
    r = c.cli("cordon", "nobody", check=False)
    assert r.returncode != 0 and "nobody" in r.stderr, r.stderr

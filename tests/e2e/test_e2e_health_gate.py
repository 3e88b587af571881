"""Issue 42, the health gate: a worker whose --health-check fails is shown unhealthy with the
check's own words in `convoy workers`, gets no rank (a job waits rather than run there, and
runs on healthy workers as soon as they come), and is healthy again by itself once its check
passes."""

import os
import time

from cluster import trainer_spec, wait_for


def _worker(c, name):
    return next(w for w in c.workers() if w["name"] == name)


def _health(c, name):
    return _worker(c, name).get("health", {}).get("state", "")


def test_an_unhealthy_worker_gets_no_ranks_and_comes_back_when_its_check_passes(make_cluster):
    c = make_cluster(workers=0)
    flag = os.path.join(c.dir, "w3-is-sick")
    with open(flag, "w") as f:
        f.write("x")
    check = f"if [ -e {flag} ]; then echo 'ib0: link down'; echo 'second line'; exit 1; fi"
    c.start_worker("w3", extra=["--health-check", check, "--health-check-interval", "1"])
    c.wait_workers_ready(1)
    wait_for(lambda: _health(c, "w3") == "HEALTH_FAILING", 30, "w3 reported unhealthy")
    assert _worker(c, "w3")["health"]["reason"] == \
        "program: ib0: link down | second line (exited with code 1)"
    assert "ib0: link down" in c.cli("workers").stdout

    # The only worker is unhealthy: the job waits instead of running there.
    first = c.submit(trainer_spec(name="waits", nodes=1, max_steps=20))
    time.sleep(3)
    assert c.status(first)["state"] == "PENDING", c.status(first)

    # Healthy workers come: the waiting job and a two-node job run on them, never on w3.
    for name in ("w1", "w2"):
        c.start_worker(name, extra=["--health-check-interval", "1"])
    c.wait_workers_ready(3)
    second = c.submit(trainer_spec(name="two-nodes", nodes=2, max_steps=20))
    for job in (first, second):
        st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=240)
        assert st["state"] == "SUCCEEDED", st["message"]
        placed = {n["worker"] for a in st["attempts"] for n in a["nodes"]}
        assert "w3" not in placed, (job, placed)
    assert {n["worker"] for n in c.status(second)["attempts"][-1]["nodes"]} == {"w1", "w2"}
    assert _health(c, "w1") == "HEALTH_OK"

    # Its check passes again: healthy by itself, no admin needed.
    os.remove(flag)
    wait_for(lambda: _health(c, "w3") == "HEALTH_OK", 30, "w3 healthy again")
    assert "ib0: link down" not in c.cli("workers").stdout

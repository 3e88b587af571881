"""Issue 16, a shared cluster, through the real binaries: the queue explains why a job waits,
the first-in-line job keeps its slots against later small jobs, and a user cannot give a job
a priority above the ceiling (README "Sharing a cluster")."""
import json
import os

from cluster import wait_for


def _sleeper(name, nodes=1, procs=1, seconds=300, **extra):
    return {"name": name, "nodes": nodes, "procs_per_node": procs,
            "command": ["sleep", str(seconds)], **extra}


def test_queue_explains_why_jobs_wait_and_holds_slots_for_the_first_in_line(make_cluster):
    c = make_cluster(workers=2, slots=2)
    running = c.submit(_sleeper("running", nodes=1, procs=1))
    c.wait_state(running, {"RUNNING"}, timeout=60)
    big = c.submit(_sleeper("big", nodes=2, procs=2))     # needs every slot of both workers
    small = c.submit(_sleeper("small", nodes=1, procs=1))  # would fit in a free slot now

    def queued():
        jobs = json.loads(c.cli("queue", "--output", "json").stdout).get("jobs", [])
        return jobs if [j["id"] for j in jobs] == [big, small] else None
    wait_for(queued, 30, "both jobs in the queue, big first")
    jobs = queued()
    assert jobs[0]["queue_position"] == 1 and jobs[1]["queue_position"] == 2
    assert "needs 2 workers with 2 free slots; 1 has them now" in jobs[0]["pending_reason"]
    assert "first in line" in jobs[0]["pending_reason"]
    assert running in jobs[0]["pending_reason"]  # it waits for that job to end
    assert f"would delay {big}" in jobs[1]["pending_reason"], jobs[1]
    table = c.cli("queue").stdout
    assert "WHY IT WAITS" in table and big in table and small in table
    status = c.cli("status", big).stdout
    assert "waiting:  #1 in the queue: needs 2 workers" in status, status
    # The small job keeps waiting though a slot is free: the big job's slots are held.
    assert c.status(small)["state"] == "PENDING"
    c.cli("cancel", running)
    c.wait_state(big, {"RUNNING"}, timeout=60)
    assert c.status(small)["state"] == "PENDING"
    assert "pending_reason" not in c.status(big) or not c.status(big)["pending_reason"]
    c.cli("cancel", big)
    c.wait_state(small, {"RUNNING"}, timeout=60)
    c.cli("cancel", small)
    for job in (running, big, small):
        c.wait_state(job, {"CANCELLED"}, timeout=60)


def test_users_priority_is_capped_and_max_runtime_stops_a_job(make_cluster):
    c = make_cluster(workers=1, secure=True)
    alice = c.make_token("user", user="alice")
    path = os.path.join(c.dir, "urgent.json")
    with open(path, "w") as f:
        json.dump(_sleeper("urgent", priority=5), f)
    r = c.cli("submit", path, check=False, token=alice)
    assert r.returncode == 7, (r.returncode, r.stderr)
    assert "priority: 5 is above the ceiling for users (0" in r.stderr, r.stderr
    # An admin may; max_runtime stops it and says so.
    with open(path, "w") as f:
        json.dump(_sleeper("urgent", priority=5, max_runtime=2), f)
    job = json.loads(c.cli("submit", path, "--output", "json").stdout)["job_id"]
    st = c.wait_state(job, {"FAILED", "SUCCEEDED", "CANCELLED"}, timeout=60)
    assert st["state"] == "FAILED"
    assert "max_runtime of 2 s exceeded" in st["message"], st["message"]

"""Issue 16, a shared cluster, through the real binaries: the queue explains why a job waits,
the first-in-line job keeps its slots against later small jobs, and a user cannot give a job
a priority above the ceiling (README "Sharing a cluster")."""
import json
import os
import signal

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


def _trainer(name, nodes=None, max_steps=0, epochs=1, train_limit=0, **extra):
    trainer = {"model": "fmnist-cnn", "epochs": epochs, "batch_size": 32, "lr": 0.01,
               "snapshot_every": 10}
    if max_steps:
        trainer["max_steps"] = max_steps
    # No test here checks the accuracy: no evaluation (tests/e2e/conftest.py).
    trainer["extra_args"] = ["--no-eval"]
    if train_limit:
        trainer["extra_args"] += ["--train-limit", str(train_limit)]
    spec = {"name": name, "procs_per_node": 1, "backend": "gloo", "trainer": trainer, **extra}
    if nodes is not None:
        spec["nodes"] = nodes
    return spec


def _step(c, job):
    """The highest step any rank of the job's current attempt has reported."""
    latest = c.status(job).get("latest", [])
    return max((int(m.get("step", 0)) for m in latest), default=0)


def _all_logs(c, job, rank=0):
    """Rank `rank`'s log of every attempt of the job, joined, oldest first."""
    attempts = c.status(job).get("attempts", [])
    out = []
    for a in attempts:
        r = c.cli("logs", job, "--rank", str(rank), "--attempt", str(a.get("attempt", 0)),
                  check=False)
        out.append(r.stdout)
    return "\n".join(out)


def test_a_higher_priority_job_preempts_a_trainer_which_resumes_at_its_step(make_cluster):
    c = make_cluster(workers=2, slots=1)
    low = c.submit(_trainer("low", nodes=2, max_steps=200, priority=-1, max_restarts=0))
    c.wait_state(low, {"RUNNING"}, timeout=60)
    wait_for(lambda: _step(c, low) >= 40, 90, "the low-priority job's 40th step")
    urgent = c.submit(_sleeper("urgent", nodes=2, procs=1, seconds=2, priority=5))

    def preempted():
        st = c.status(low)
        return st if st["state"] == "PENDING" and st.get("preemptions", 0) == 1 else None
    st = wait_for(preempted, 30, "the low-priority job preempted back to PENDING")
    assert f"preempted by {urgent}" in st["message"], st["message"]
    c.wait_state(urgent, {"RUNNING", "SUCCEEDED"}, timeout=60)
    # Its ranks checkpointed and exited 0 (a preemption, not a failure).
    first = c.logs(low, 0, attempt=0)
    stopped = [line for line in first.splitlines() if line.startswith("preempted at step")]
    assert stopped, first[-2000:]
    step = int(stopped[0].split()[3].rstrip(":"))
    assert f"preempted by {urgent}" in stopped[0], stopped[0]
    c.wait_state(urgent, {"SUCCEEDED"}, timeout=60)
    st = c.wait_state(low, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=180)
    assert st["state"] == "SUCCEEDED", st["message"]
    assert st.get("restarts", 0) == 0 and st["preemptions"] == 1, st
    assert len(st["attempts"]) == 2
    resumed = c.logs(low, 0, attempt=1)
    assert f"at epoch 0, step {step} " in resumed, resumed[:3000]
    for e in st["events"]:
        if e.get("to") == "PENDING" and "preempted" in e.get("reason", ""):
            assert urgent in e["reason"]
            break
    else:
        raise AssertionError(f"no preemption event: {st['events']}")


def test_an_elastic_job_shrinks_and_grows_back_and_sees_each_sample_once(make_cluster):
    c = make_cluster(workers=3, slots=1, worker_timeout=3,
                     coordinator_extra=["--min-resize-interval", "4"])
    job = c.submit(_trainer("elastic", epochs=3, train_limit=6000, min_nodes=2, max_nodes=3,
                            max_restarts=0))
    st = c.wait_state(job, {"RUNNING"}, timeout=60)
    assert len(st["attempts"][-1]["nodes"]) == 3
    wait_for(lambda: _step(c, job) >= 20, 90, "the elastic job's 20th step")
    lost = st["attempts"][-1]["nodes"][-1]["worker"]
    c.signal(lost, signal.SIGKILL)

    def on(n):
        def check():
            s = c.status(job)
            a = s["attempts"][-1] if s.get("attempts") else {}
            return s if s["state"] == "RUNNING" and len(a.get("nodes", [])) == n else None
        return check
    st = wait_for(on(2), 60, "the job running again on 2 nodes")
    assert st.get("restarts", 0) == 0
    c.start_worker("w4", 1)
    st = wait_for(on(3), 90, "the job grown back to 3 nodes")
    st = c.wait_state(job, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=300)
    assert st["state"] == "SUCCEEDED", st["message"]
    assert st.get("restarts", 0) == 0, st
    sizes = [len(a["nodes"]) for a in st["attempts"]]
    assert sizes[0] == 3 and 2 in sizes and sizes[-1] == 3, sizes
    logs = _all_logs(c, job)
    for epoch in range(3):
        assert f"epoch {epoch} sample check: 6000 of 6000 samples seen exactly once" in logs, \
            (epoch, [line for line in logs.splitlines() if "sample check" in line])
    assert "sample check FAILED" not in logs


def test_gpus_are_given_to_processes_by_index(make_cluster):
    c = make_cluster(workers=0)
    c.start_worker("g1", 4, env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    c.wait_workers_ready(1)
    w = c.workers()[0]
    assert w.get("gpus") == [0, 1, 2, 3], w
    spec = {"name": "gpus", "nodes": 1, "procs_per_node": 2, "gpus_per_proc": 2,
            "command": ["sh", "-c", "echo devices=$CUDA_VISIBLE_DEVICES; sleep 2"]}
    a, b = c.submit(spec), c.submit(dict(spec, procs_per_node=1))
    st = c.wait_state(a, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert st["state"] == "SUCCEEDED", st["message"]
    seen = {c.logs(a, r).strip() for r in (0, 1)}
    assert seen == {"devices=0,1", "devices=2,3"}, seen
    # b needs two GPUs: it waits while a holds all four, then gets the lowest free ones.
    st = c.wait_state(b, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert st["state"] == "SUCCEEDED", st["message"]
    assert c.logs(b, 0).strip() == "devices=0,1"

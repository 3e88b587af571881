"""Issue 2: a job goes from `convoy submit` to SUCCEEDED across real processes."""

import os
import subprocess
import time

from cluster import BIN, trainer_spec, wait_for


def test_ddp_job_succeeds_with_metrics_and_logs_from_both_ranks(make_cluster):
    c = make_cluster(workers=2)
    t0 = time.time()
    job = c.submit(trainer_spec(max_steps=150, evaluate=True))
    st = c.wait_state(job, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=300)
    assert st["state"] == "SUCCEEDED", st["message"]
    ranks = {m["rank"]: m for m in st["latest"]}
    assert set(ranks) == {0, 1}, st["latest"]
    for m in ranks.values():
        assert int(m["step"]) == 150
        assert 0 < float(m["values"]["test_accuracy"]) <= 1
    # The ranks ran on different workers, as node 0 and node 1.
    nodes = st["attempts"][0]["nodes"]
    assert sorted(n["worker"] for n in nodes) == ["w1", "w2"]
    log1 = c.logs(job, 1)
    assert "rank 1/2" in log1, log1[-2000:]
    assert "test accuracy" in log1
    text = c.cli("status", job).stdout
    assert "SUCCEEDED" in text and "events:" in text
    print(f"2x1 fmnist job, 150 steps: submit to SUCCEEDED in {time.time() - t0:.1f} s")


def test_failing_command_names_rank_and_exit_code(make_cluster):
    c = make_cluster(workers=1)
    job = c.submit({"name": "fails", "nodes": 1, "procs_per_node": 1, "command": ["false"]})
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert st["state"] == "FAILED"
    failure = st["attempts"][0]["failure"]
    assert failure["rank"] == 0 and failure["worker"] == "w1"
    assert failure["exit"]["exit_code"] == 1
    text = c.cli("status", job).stdout
    assert "rank 0 on worker w1" in text and "exited with code 1" in text, text
    # watch exits non-zero for a job that did not succeed.
    assert c.cli("watch", job, check=False).returncode == 1


def test_cancel_leaves_no_process(make_cluster):
    c = make_cluster(workers=2)
    job = c.submit({"name": "sleeper", "nodes": 2, "procs_per_node": 1,
                    "command": ["sleep", "1000"]})
    c.wait_state(job, "RUNNING", timeout=60)
    wait_for(lambda: len(c.job_pids(job)) == 2, 10, "both ranks alive")
    c.cli("cancel", job)
    assert c.status(job)["state"] == "CANCELLED"
    wait_for(lambda: not c.job_pids(job), 5, "every rank gone from /proc")
    # Slots come back.
    wait_for(lambda: all(w["used_slots"] == 0 for w in c.workers()), 10, "slots released")


def test_bad_input_is_refused_with_the_field_named(make_cluster):
    c = make_cluster(workers=1)
    path = os.path.join(c.dir, "bad.yaml")
    with open(path, "w") as f:
        f.write("name: x\nnodes: 1\nprocs_per_node: 1\ncommand: [true]\ncolour: red\n")
    r = c.cli("submit", path, check=False)
    assert r.returncode == 2
    assert "colour" in r.stderr
    r = c.cli("status", "j-999999", check=False)
    assert r.returncode == 4
    # A spec that bypasses the CLI's parser is validated by the coordinator too: the job list
    # is unchanged and the coordinator stays up.
    assert c.cli("list", "--output", "json").stdout.count('"id"') == 0
    r = subprocess.run([os.path.join(BIN, "convoy"), "--coordinator", "127.0.0.1:1", "list"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3

"""Issue 18, "tidy" and "the CLI does what people reach for", with the real binaries:
`convoy list` filters and pages, `convoy delete` removes a job's rows and files, retention
(--attempt-dir-retention on the worker, --job-retention on the coordinator) does the same
by itself and `convoy logs` then says why there is nothing, a rank that does not exist is a
usage error, `-o yaml` stands beside `-o json`, and every verb's --help shows an example."""

import json
import os

import yaml

from cluster import wait_for

ECHO = {"name": "echo", "nodes": 1, "procs_per_node": 1,
        "command": ["sh", "-c", "echo hello from $RANK; echo ck > \"$CONVOY_CHECKPOINT_DIR/ck\""]}
# Two nodes never fit on a one-worker cluster: such a job stays PENDING and never runs.
WAITS = dict(ECHO, name="waits", nodes=2)


def ids(out):
    return [j["id"] for j in out["jobs"]]


def test_list_filters_and_pages_and_delete_removes_rows_and_files(make_cluster):
    c = make_cluster(workers=1)
    done = c.submit(ECHO)
    assert c.wait_state(done, {"SUCCEEDED", "FAILED"}, timeout=60)["state"] == "SUCCEEDED"
    waiting = [c.submit(WAITS) for _ in range(4)]

    # Filters.
    assert ids(yaml.safe_load(c.cli("list", "--state", "succeeded", "-o", "yaml").stdout)) == [done]
    pending = json.loads(c.cli("list", "--state", "PENDING,RUNNING", "--since", "1h", "-o",
                               "json").stdout)
    assert ids(pending) == waiting
    assert ids(json.loads(c.cli("list", "--owner", "nobody", "-o", "json").stdout)) == []
    r = c.cli("list", "--state", "RUNING", check=False)
    assert r.returncode == 2 and "state: unknown state 'RUNING'" in r.stderr, r.stderr
    r = c.cli("list", "--since", "yesterday", check=False)
    assert r.returncode == 2 and "since: 'yesterday'" in r.stderr, r.stderr

    # Paging: pages of 2 follow each other; without --limit everything, as before.
    seen, token = [], ""
    while True:
        args = ["list", "--limit", "2", "-o", "json"] + (["--page-token", token] if token else [])
        page = json.loads(c.cli(*args).stdout)
        seen += ids(page)
        token = page["next_page_token"]
        if not token:
            break
    assert seen == [done] + waiting
    r = c.cli("list", "--limit", "2")
    assert "--page-token" in r.stderr and r.stdout.count("\n") == 3, r.stdout + r.stderr
    text = c.cli("list").stdout
    assert all(j in text for j in [done] + waiting)
    r = c.cli("list", "--page-token", "garbage", check=False)
    assert r.returncode == 2 and "page_token: malformed" in r.stderr, r.stderr

    # Delete: only finished jobs; a finished one's rows and files go.
    r = c.cli("delete", waiting[0], check=False)
    assert r.returncode == 5 and "cancel it first" in r.stderr, r.stderr
    attempts = os.path.join(c.dir, "w1", "jobs", c.job_dir_name(done))
    job_dir = c.job_dir(done)
    assert os.path.exists(os.path.join(attempts, "attempt-0", "rank-0.log"))
    assert os.path.exists(os.path.join(job_dir, "checkpoints", "ck"))
    out = c.cli("delete", done).stdout
    assert f"{done} deleted" in out and "w1" in out, out
    wait_for(lambda: not os.path.exists(attempts) and not os.path.exists(job_dir), 15,
             "the job's files gone from the worker")
    assert c.cli("status", done, check=False).returncode == 4
    assert done not in c.cli("list").stdout
    c.cli("cancel", waiting[0])
    deleted = json.loads(c.cli("delete", waiting[0], "-o", "json").stdout)
    assert deleted == {"job_id": waiting[0], "workers": []}  # it never ran anywhere


def test_logs_of_a_missing_rank_yaml_output_and_help_examples(make_cluster):
    c = make_cluster(workers=1)
    job = c.submit(ECHO)
    assert c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)["state"] == "SUCCEEDED"
    r = c.cli("logs", job, "--rank", "7", check=False)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"job {job} has no rank 7; its ranks are 0" in r.stderr, r.stderr
    assert c.cli("logs", job, "--rank", "0").stdout == "hello from 0\n"
    assert c.cli("logs", "j-999999", check=False).returncode == 4

    # -o yaml says what -o json says, on every verb that has it. A worker's heartbeat time and
    # its health checks move between the two calls, so they are left out of the comparison.
    def settled(doc):
        if isinstance(doc, dict):
            return {k: settled(v) for k, v in doc.items()
                    if k not in ("last_heartbeat_unix_ms", "health")}
        if isinstance(doc, list):
            return [settled(v) for v in doc]
        return doc

    for args in (["status", job], ["list"], ["workers"], ["plot", job]):
        as_json = json.loads(c.cli(*args, "-o", "json").stdout)
        as_yaml = yaml.safe_load(c.cli(*args, "-o", "yaml").stdout)
        assert settled(as_yaml) == settled(as_json), args
        if args == ["workers"]:
            assert as_yaml["workers"][0]["last_heartbeat_unix_ms"], as_yaml
            assert as_yaml["workers"][0]["health"]["state"] == "HEALTH_OK", as_yaml
    docs = list(yaml.safe_load_all(c.cli("watch", job, "-o", "yaml").stdout))
    assert docs[0]["job"]["id"] == job and docs[-1]["job"]["state"] == "SUCCEEDED"
    r = c.cli("submit", "--nodes", "2", "-o", "yaml", "--", "true")
    submitted = yaml.safe_load(r.stdout)["job_id"]
    c.jobs.append(submitted)
    assert yaml.safe_load(c.cli("cancel", submitted, "-o", "yaml").stdout)["state"] == "CANCELLED"

    for verb in ("submit", "list", "status", "watch", "logs", "cancel", "delete", "workers",
                 "drain", "undrain", "plot", "top", "login", "queue"):
        r = c.cli(verb, "--help")
        assert "Example" in r.stdout and f"convoy {verb}" in r.stdout.split("Example", 1)[1], verb


def test_retention_removes_finished_attempt_dirs_then_whole_jobs(make_cluster):
    c = make_cluster(workers=1, worker_extra=["--attempt-dir-retention", "2s"],
                     coordinator_extra=["--job-retention", "1"])
    first = c.submit(ECHO)
    assert c.wait_state(first, {"SUCCEEDED", "FAILED"}, timeout=60)["state"] == "SUCCEEDED"
    attempt_dir = os.path.join(c.dir, "w1", "jobs", c.job_dir_name(first), "attempt-0")
    assert os.path.exists(os.path.join(attempt_dir, "rank-0.log"))
    # The worker: the finished attempt's directory goes 2 s after it ended (swept every 1 s).
    wait_for(lambda: not os.path.exists(attempt_dir), 20, "the attempt directory removed")
    r = c.cli("logs", first, check=False)
    assert r.returncode == 5 and "were removed from worker w1" in r.stderr, (r.returncode, r.stderr)
    first_dir = c.job_dir(first)
    assert os.path.exists(os.path.join(first_dir, "checkpoints", "ck"))
    # The coordinator keeps the newest finished job only: the second pushes the first out,
    # rows and files.
    second = c.submit(ECHO)
    assert c.wait_state(second, {"SUCCEEDED", "FAILED"}, timeout=60)["state"] == "SUCCEEDED"
    wait_for(lambda: c.cli("status", first, check=False).returncode == 4, 30,
             "the first job deleted by --job-retention 1")
    wait_for(lambda: not os.path.exists(first_dir)
             and not os.path.exists(os.path.dirname(attempt_dir)), 15,
             "the first job's files gone")
    assert c.status(second)["state"] == "SUCCEEDED"

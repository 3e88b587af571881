"""Issue 42, "Stragglers named" (README "When nodes are sick"): a user's own DDP script
(examples/python/train_ddp.py, unchanged apart from a sleep on the slow node) reports its steps
with convoy_metrics.report; the coordinator names the rank on the slow node within 30 steps in
`convoy status`, `convoy top`, the job's events and /metrics. With `on_straggler: replace` and
a spare worker, the slow node is swapped for the spare and the job trains on there without a
restart counted.

The slow node is worker w2: its ranks see CONVOY_E2E_SLOW (passed with --pass-env, which no
other worker has) and sleep that many seconds after each optimiser step, before they report
it (the time a slow host adds to its rank's own work)."""

import json
import os
import shutil
import urllib.request

import pytest

from cluster import wait_for

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python")
HAVE_TORCH = os.path.exists("/usr/lib/python3/dist-packages/torch")
ENV = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
REPORT = "            report(step=step, epoch=epoch, loss=loss.item(), samples=step * len(x) * world)\n"
# What the tests add to the script, right before its report: the only change.
SICK_HOST = (
    '            if os.environ.get("CONVOY_E2E_SLOW"):\n'
    '                time.sleep(float(os.environ["CONVOY_E2E_SLOW"]))\n'
    '            if os.environ.get("CONVOY_E2E_HANG") == str(step) and \\\n'
    '                    os.environ.get("CONVOY_ATTEMPT") == "0":\n'
    '                time.sleep(3600)  # alive, but never steps again\n')


def script_dir(tmp_path):
    """The user's project: train_ddp.py with SICK_HOST before its report, and convoy_metrics."""
    with open(os.path.join(EXAMPLES, "train_ddp.py")) as f:
        text = f.read()
    assert text.count(REPORT) == 1, "examples/python/train_ddp.py changed: update REPORT"
    d = tmp_path / "code"
    d.mkdir()
    (d / "train_ddp.py").write_text(text.replace(REPORT, SICK_HOST + REPORT))
    shutil.copy(os.path.join(EXAMPLES, "convoy_metrics.py"), d)
    return str(d)


def submit_script(c, code, name, steps, **extra):
    spec = {"name": name, "nodes": 2, "procs_per_node": 1, "backend": "gloo",
            "command": ["python3", "train_ddp.py", "--max-steps", str(steps),
                        "--batch-size", "32"],
            "env": ENV, **extra}
    path = os.path.join(c.dir, f"{name}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    job = json.loads(c.cli("submit", path, "--code", code, "--output", "json").stdout)["job_id"]
    c.jobs.append(job)
    return job


def metric(c, name, labels):
    with urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def workers_of(attempt):
    return sorted(n["worker"] for n in attempt["nodes"])


@pytest.mark.skipif(not HAVE_TORCH, reason="needs Debian's python3-torch")
def test_a_slow_node_is_named_within_30_steps_and_replaced_by_a_spare(make_cluster, tmp_path):
    code = script_dir(tmp_path)
    c = make_cluster(workers=0, coordinator_extra=["--preempt-grace", "2"])
    c.start_worker("w1")
    c.start_worker("w2", extra=["--pass-env", "CONVOY_E2E_SLOW"],
                   env={"CONVOY_E2E_SLOW": "0.25"})
    c.wait_workers_ready(2)
    job = submit_script(c, code, "report", 45)

    def named():
        st = c.status(job)
        return st if st.get("stragglers") else None
    st = wait_for(named, 60, "a straggler named")
    s = st["stragglers"][0]
    assert s["worker"] == "w2" and s["window_steps"] == 20, s
    assert int(s["at_step"]) <= 30, s
    assert s["step_s"] >= 1.5 * s["peers_s"], s
    shown = c.cli("status", job).stdout
    assert f"straggler: rank {s['rank']} on w2" in shown, shown
    assert "(straggler)" in c.cli("top", "--once").stdout
    # /metrics follows at the coordinator's next export.
    wait_for(lambda: metric(c, "convoy_job_stragglers", {"job_id": job}) == 1, 20,
             "convoy_job_stragglers 1")
    ratio = metric(c, "convoy_rank_step_time_ratio", {"job_id": job, "rank": str(s["rank"])})
    assert ratio is not None and ratio >= 1.5, ratio
    assert any(e["reason"].startswith(f"straggler: rank {s['rank']} on w2")
               for e in st["events"]), st["events"]
    c.cli("cancel", job)  # seen enough; the rest of its steps would only cost time
    c.wait_state(job, {"CANCELLED"}, timeout=30)

    # on_straggler: replace, with a spare: w2's rank moves to w3, no restart used.
    c.start_worker("w3")
    c.wait_workers_ready(3)
    # Cancelled once the next attempt trains on the spare: the script's final evaluation (over
    # 17 s on 2 busy cores) would only cost time.
    job = submit_script(c, code, "replace", 10000, on_straggler="replace", straggler_steps=10,
                        max_restarts=0)

    def spare_trains():
        st = c.status(job)
        return st if st["attempt"] == 1 and any(
            int(m.get("step", 0)) >= 5 and m["attempt"] == 1 for m in st.get("latest", [])) \
            else None
    st = wait_for(spare_trains, 90, "the attempt on the spare's 5th step")
    assert st["state"] == "RUNNING", (st["message"], st["events"])
    assert st["restarts"] == 0 and st["node_moves"] == 1, st
    assert workers_of(st["attempts"][0]) == ["w1", "w2"], st["attempts"][0]
    assert workers_of(st["attempts"][-1]) == ["w1", "w3"], st["attempts"][-1]
    assert any("replacing straggler w2" in e["reason"] and "with spare w3" in e["reason"]
               for e in st["events"]), st["events"]
    c.cli("cancel", job)
    c.wait_state(job, {"CANCELLED"}, timeout=30)

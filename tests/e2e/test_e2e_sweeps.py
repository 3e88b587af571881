"""Issue 46, "Sweeps", through the real CLI and daemons: `convoy submit --sweep` makes one
sweep whose trials are jobs, `convoy list` shows it as one row (its trials with --trials),
`convoy status` shows each trial and the best (and `-o json` the same), `convoy cancel`
cancels the sweep's trials. The trials are tiny Python scripts that report through
examples/python's convoy_metrics, shipped with --code (the built-in trainer costs ~2 s a
start; bench/sweep_vs_serial.py runs it)."""

import json
import os
import shutil
import tempfile

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python")
TRIAL = """import os, time, convoy_metrics
lr = float(os.environ["LR"])
for step in range(1, int(os.environ.get("STEPS", "4")) + 1):
    convoy_metrics.report(kind="step", step=step, loss=1 / (lr * step), score=lr)
    time.sleep(0.05)
"""


@pytest.fixture
def code_dir():
    d = tempfile.mkdtemp(prefix="convoy-code-")
    shutil.copy(os.path.join(EXAMPLES, "convoy_metrics.py"), d)
    with open(os.path.join(d, "trial.py"), "w") as f:
        f.write(TRIAL)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def submit_sweep(c, code_dir, *flags, steps=4):
    spec = os.path.join(code_dir, "sweep.json")
    with open(spec, "w") as f:
        json.dump({"name": "lr", "nodes": 1, "procs_per_node": 1,
                   "command": ["python3", "trial.py"],
                   "env": {"PATH": "/usr/bin:/bin", "LR": "1", "STEPS": str(steps)}}, f)
    r = c.cli("submit", spec, "--code", code_dir, *flags, "--output", "json")
    job = json.loads(r.stdout)["job_id"]
    c.jobs.append(job)
    return job


def test_a_sweep_is_one_row_and_status_names_the_best_trial(make_cluster, code_dir):
    c = make_cluster(workers=1, slots=2)
    sweep = submit_sweep(c, code_dir, "--sweep", "env.LR=0.5,0.9,0.2", "--max-parallel", "2",
                         "--sweep-metric", "score:max")
    st = c.wait_state(sweep, {"SUCCEEDED", "FAILED"}, timeout=120)
    assert st["state"] == "SUCCEEDED", st["message"]
    trials = st["sweep"]["trials"]
    assert [t["parameters"][0]["value"] for t in trials] == ["0.5", "0.9", "0.2"]
    best = trials[1]["job_id"]
    assert st["sweep"]["best_trial"] == best
    assert trials[1]["best_metric"] == 0.9
    c.jobs.extend(t["job_id"] for t in trials)

    rows = c.cli("list").stdout.strip().splitlines()
    assert len(rows) == 2, rows  # the header and the sweep
    assert sweep in rows[1] and "sweep 3/3 done; best " + best + " score 0.9" in rows[1], rows
    rows = c.cli("list", "--trials").stdout.strip().splitlines()
    assert len(rows) == 5, rows
    assert sum("trial of " + sweep in r for r in rows) == 3, rows

    text = c.cli("status", sweep).stdout
    assert "3 trials (grid), at most 2 at once; score, more is better" in text, text
    assert f"best trial: {best} (env.LR=0.9): score 0.9 at step" in text, text
    for lr in ("0.5", "0.9", "0.2"):
        assert f"env.LR={lr}" in text, text


def test_cancelling_a_sweep_cancels_its_trials(make_cluster, code_dir):
    c = make_cluster(workers=1, slots=2)
    sweep = submit_sweep(c, code_dir, "--sweep", "env.LR=1,2,3", "--max-parallel", "2",
                         steps=2000)
    c.wait_state(sweep, "RUNNING", timeout=60)
    out = json.loads(c.cli("cancel", sweep, "--output", "json").stdout)
    assert out["state"] == "CANCELLED", out
    st = c.status(sweep)
    made = [t for t in st["sweep"]["trials"] if t["job_id"]]
    assert len(made) == 2, st["sweep"]
    for t in made:
        job = t["job_id"]
        c.jobs.append(job)
        assert c.wait_state(job, "CANCELLED", timeout=60)["state"] == "CANCELLED"
    not_made = [t for t in st["sweep"]["trials"] if not t["job_id"]]
    assert [t["stopped_reason"] for t in not_made] == ["not started: the sweep was cancelled"]

"""Issue 14: a job's metric history outlives the job and a coordinator kill -9, and the CLI
draws it (status sparkline, plot chart and series, top)."""

import time

from cluster import trainer_spec, wait_for

BLOCKS = set("▁▂▃▄▅▆▇█")


def test_history_survives_a_coordinator_kill9(make_cluster):
    c = make_cluster(workers=2, secure=True)
    job = c.submit(trainer_spec(max_steps=30, evaluate=True))

    # While it runs, `top --once` lists it (no escape codes for scripts).
    def listed():
        out = c.cli("top", "--once").stdout
        return out if job in out and "RUNNING" in out else None
    top = wait_for(listed, 120, f"{job} running in convoy top")
    assert "\x1b" not in top
    assert "PROGRESS" in top and "SLOWEST" in top

    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=180)
    assert st["state"] == "SUCCEEDED", st["message"]
    time.sleep(0.5)  # records that arrive after the end are written at the next tick

    def plot(*args):
        return c.cli("plot", job, *args).stdout

    before = plot("--output", "csv")
    lines = before.splitlines()
    assert lines[0] == "rank,attempt,epoch,step,time_unix_ms,loss"
    rows = [line.split(",") for line in lines[1:]]
    assert {r[0] for r in rows} == {"0", "1"}, before
    for rank in ("0", "1"):
        steps = [int(r[3]) for r in rows if r[0] == rank]
        assert steps == sorted(steps) and len(steps) >= 10, before  # 30 records < 512: kept
        assert steps[-1] == 30, before
    accuracy_before = plot("--metric", "accuracy", "--output", "csv")
    assert len(accuracy_before.splitlines()) == 3, accuracy_before  # one evaluation per rank
    json_before = plot("--output", "json", "--rank", "1")

    c.restart_coordinator()
    wait_for(lambda: c.cli("plot", job, "--output", "csv", check=False).returncode == 0, 30,
             "the restarted coordinator answering")
    assert plot("--output", "csv") == before
    assert plot("--metric", "accuracy", "--output", "csv") == accuracy_before
    assert plot("--output", "json", "--rank", "1") == json_before

    status = c.cli("status", job).stdout
    assert "history (rank 0" in status, status
    loss_line = next(line for line in status.splitlines() if line.strip().startswith("loss"))
    assert BLOCKS & set(loss_line), loss_line
    assert "test accuracy per epoch" in status, status
    chart = plot("--metric", "loss")
    assert "┤" in chart and "└" in chart and "step" in chart, chart
    assert any(0x2800 <= ord(ch) <= 0x28FF for ch in chart), chart
    # A viewer may read the history; an unknown job is exit code 4.
    viewer = c.make_token("viewer", user="vera")
    assert c.cli("plot", job, "--output", "csv", token=viewer).stdout == before
    assert c.cli("plot", "j-999999", check=False).returncode == 4

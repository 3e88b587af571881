"""Issue 46, "Checkpoints kept by policy": a job's script marks ten checkpoints with
convoy_metrics.checkpoint(); with `checkpoint: {keep_last: 2, keep_best: {metric:
test_accuracy, goal: max, count: 1}}` the worker keeps exactly the newest two and the best,
`convoy checkpoints` lists them (also after a coordinator restart), a deletion that a kill -9
of the worker interrupted is finished when it starts again, and `resume_from` with
`resume_checkpoint: best` starts from the best one."""

import json
import os
import shutil
import signal

from cluster import trainer_spec, wait_for

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python")
PATH_ENV = {"PATH": "/usr/bin:/bin"}
ACCURACY = [0.50, 0.60, 0.70, 0.80, 0.90, 0.85, 0.84, 0.83, 0.82, 0.81]

SCRIPT = """
import os, sys, time
import convoy_metrics
d = os.environ["CONVOY_CHECKPOINT_DIR"]
for i, acc in enumerate(%r, 1):
    step = 100 * i
    name = "ckpt-%%012d.pt" %% step
    with open(os.path.join(d, name + ".tmp"), "w") as f:
        f.write("state of step %%d" %% step)
    os.rename(os.path.join(d, name + ".tmp"), os.path.join(d, name))
    convoy_metrics.checkpoint(name, step=step, loss=1.0 / i, test_accuracy=acc)
    time.sleep(0.1)
time.sleep(1)
""" % (ACCURACY,)


def name(step):
    return "ckpt-%012d.pt" % step


def kept(c, job):
    return json.loads(c.cli("checkpoints", job, "-o", "json").stdout).get("checkpoints", [])


def test_ten_checkpoints_keep_last_two_and_best_one_across_a_worker_kill(make_cluster, tmp_path):
    c = make_cluster(workers=1)
    (tmp_path / "ckpt.py").write_text(SCRIPT)
    shutil.copy(os.path.join(EXAMPLES, "convoy_metrics.py"), tmp_path)
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({
        "name": "kept", "nodes": 1, "procs_per_node": 1, "command": ["python3", "ckpt.py"],
        "env": PATH_ENV,
        "checkpoint": {"keep_last": 2,
                       "keep_best": {"metric": "test_accuracy", "goal": "max", "count": 1}}}))
    job = json.loads(c.cli("submit", str(spec), "--code", str(tmp_path), "--output",
                           "json").stdout)["job_id"]
    c.jobs.append(job)
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=120)
    assert st["state"] == "SUCCEEDED", (st["message"], c.logs(job, 0))
    want = [name(1000), name(900), name(500)]
    wait_for(lambda: [k["path"] for k in kept(c, job)] == want, 20, "three checkpoints listed")
    ckpt_dir = os.path.join(c.job_dir(job), "checkpoints")
    assert sorted(os.listdir(ckpt_dir)) == sorted(want)
    listed = kept(c, job)
    assert [k["kept_as"] for k in listed] == [["last"], ["last"], ["best"]], listed
    assert listed[2]["metrics"]["test_accuracy"] == 0.9 and listed[2]["step"] == "500", listed
    assert all(k["worker"] == "w1" for k in listed), listed
    text = c.cli("checkpoints", job).stdout
    assert "PATH" in text and name(500) in text and "test_accuracy=0.9" in text, text

    # kill -9 of the worker in the middle of a deletion: the intent is in the manifest and the
    # victim already has its hidden name. The worker finishes it when it starts again.
    c.signal("w1", signal.SIGKILL)
    manifest_path = os.path.join(c.dir, "w1", "jobs", c.job_dir_name(job), "checkpoints.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    manifest["checkpoints"] = [k for k in manifest["checkpoints"] if k["path"] != name(900)]
    manifest["deleting"] = [name(900)]
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    os.rename(os.path.join(ckpt_dir, name(900)),
              os.path.join(ckpt_dir, ".convoy-deleting-" + name(900)))
    c.start_worker("w1")
    c.wait_workers_ready(1)
    wait_for(lambda: sorted(os.listdir(ckpt_dir)) == sorted([name(1000), name(500)]), 20,
             "the interrupted deletion finished")
    wait_for(lambda: [k["path"] for k in kept(c, job)] == [name(1000), name(500)], 20,
             "the worker's new list reported")
    with open(manifest_path) as f:
        assert json.load(f)["deleting"] == []

    # The list is kept with the job: a restarted coordinator still has it.
    c.restart_coordinator()
    wait_for(lambda: c.cli("checkpoints", job, check=False).returncode == 0, 30, "coordinator")
    assert [k["path"] for k in kept(c, job)] == [name(1000), name(500)]
    c.wait_workers_ready(1)

    # resume_checkpoint: best starts from the best checkpoint's file.
    resumed = c.submit({"name": "resumed", "nodes": 1, "procs_per_node": 1,
                        "command": ["sh", "-c", "echo from=$CONVOY_RESUME_FROM"],
                        "env": PATH_ENV, "resume_from": job, "resume_checkpoint": "best"})
    assert c.wait_state(resumed, {"SUCCEEDED", "FAILED"}, timeout=60)["state"] == "SUCCEEDED"
    assert c.logs(resumed, 0).strip().endswith("/" + name(500)), c.logs(resumed, 0)
    # A job with no keep_best has no best: refused at submit, naming the field.
    spec2 = tmp_path / "bad.json"
    spec2.write_text(json.dumps({"name": "bad", "nodes": 1, "procs_per_node": 1,
                                 "command": ["true"], "resume_from": resumed,
                                 "resume_checkpoint": "best"}))
    r = c.cli("submit", str(spec2), check=False)
    assert r.returncode != 0 and "resume_checkpoint: best: job " + resumed in r.stderr, r.stderr


def test_the_builtin_trainer_marks_its_checkpoints_and_the_worker_keeps_them(make_cluster):
    """The trainer marks each checkpoint (step, loss) and, with a policy, leaves the pruning
    to the worker: keep_last 3 keeps three (the trainer alone keeps two)."""
    c = make_cluster(workers=1)
    spec = trainer_spec(name="marked", nodes=1, max_steps=40, checkpoint={"keep_last": 3})
    spec["trainer"]["checkpoint_every"] = 10
    job = c.submit(spec)
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=240)
    assert st["state"] == "SUCCEEDED", (st["message"], c.logs(job, 0))
    want = [name(40), name(30), name(20)]
    wait_for(lambda: [k["path"] for k in kept(c, job)] == want, 20, "three checkpoints listed")
    assert sorted(os.listdir(os.path.join(c.job_dir(job), "checkpoints"))) == sorted(want)
    listed = kept(c, job)
    assert all("loss" in k["metrics"] for k in listed), listed
    assert [k["step"] for k in listed] == ["40", "30", "20"], listed

"""A job resumes only its own state (issue 26). Job ids restart at j-000001 on every fresh
state directory, while snapshots in host memory and checkpoints under the job root outlive
a cluster killed -9: a second cluster's j-000001 with the same worker names finds the
first's state under its own id, and must train from step 0 rather than resume another job's
weights."""

import glob
import json
import os
import shutil
import signal
import tempfile

from cluster import Cluster, process_gone, trainer_spec, wait_for


def kill_everything(c, *jobs):
    """Every daemon of cluster `c` and every rank of its `jobs` killed -9, as a crash would."""
    ranks = [pid for job in jobs for pid in c.job_pids(job)]
    for name in list(c.procs):
        c.signal(name, signal.SIGKILL)
    for pid in ranks:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    wait_for(lambda: all(process_gone(p) for p in ranks), 10, "the first cluster's ranks gone")


def second_cluster(make_cluster, snapshot_root, job_root=None, extra=()):
    """A new cluster (fresh state directory: its ids start at j-000001 again) whose one worker
    is named w1, as the first's was, and uses the given snapshot root (and job root: else its
    own; and `extra` flags)."""
    c = make_cluster(workers=0)
    c.job_root = job_root or c.job_root
    c.start_worker("w1", 1, extra=["--snapshot-dir", snapshot_root, *extra])
    c.wait_workers_ready(1)
    return c


def assert_trained_from_step_0(c, job, steps, refused):
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=180)
    assert st["state"] == "SUCCEEDED", st["message"]
    assert len(st["uid"]) == 32, st
    log = c.logs(job, 0)
    assert "resumed from" not in log, log[-3000:]
    if refused:
        # The trainer says whose state it found and that it is not this job's.
        assert "not resuming from " + refused in log, log[-3000:]
        assert "it belongs to job " in log and f"not this job ({st['uid']} of cluster " in log, \
            log[-3000:]
    assert "starting at step 0" in log, log[-3000:]
    # Its metric history starts at the beginning and trains every requested step.
    csv = c.cli("plot", job, "--output", "csv").stdout
    rows = [line.split(",") for line in csv.splitlines()[1:]]
    history = sorted(int(r[3]) for r in rows if r[0] == "0")
    assert history and history[0] <= 2 and history[-1] == steps, history


def test_another_clusters_snapshot_under_the_same_job_id_is_not_resumed(make_cluster):
    snapshots = tempfile.mkdtemp(prefix="convoy-e2e-snap-")  # never /dev/shm/convoy-w1
    try:
        a = make_cluster(workers=1, worker_extra=["--snapshot-dir", snapshots])
        first = a.submit(trainer_spec(nodes=1, max_steps=2000))
        assert first == "j-000001"
        a.wait_state(first, "RUNNING", timeout=60)
        # Snapshots well past the start, in w1's snapshot directory of j-000001.
        def snapshot_past_20():
            steps = [int(os.path.basename(p)[5:17])
                     for p in glob.glob(os.path.join(snapshots, "**", "snap-*.bin"),
                                        recursive=True)]
            return max(steps, default=0) >= 20
        wait_for(snapshot_past_20, 120, "a snapshot past step 20")
        kill_everything(a, first)
        left = glob.glob(os.path.join(snapshots, "**", "snap-*.bin"), recursive=True)
        assert left, "the killed worker's snapshots are gone: nothing to reproduce"

        # Under <cluster id>-<job uid>, not under the job id.
        assert all(len(os.path.basename(os.path.dirname(p))) == 65 for p in left), left

        # Separate job roots: only the snapshots could be taken for this job's own.
        b = second_cluster(make_cluster, snapshots)
        # Its worker reported the snapshot directories it found; they belong to no job of
        # its cluster that may still run, so it removed them at once and said what it freed.
        wait_for(lambda: not any(os.path.exists(p) for p in left), 30,
                 "the other cluster's snapshots removed")
        assert ("removed the snapshots of 1 job(s) that no running job of this cluster owns"
                in b.logs_of("w1")), b.logs_of("w1")[-2000:]
        job = b.submit(trainer_spec(nodes=1, max_steps=50))
        assert job == first, "a fresh state directory starts at j-000001 again"
        # The worker keeps each job's snapshots under its cluster id and uid: the new job
        # never sees the old one's (the trainer would refuse them too: the other test).
        assert_trained_from_step_0(b, job, 50, None)

        # A worker killed -9 and restarted keeps the snapshots of a job that still runs.
        long = b.submit(trainer_spec("long", nodes=1, max_steps=100000, max_restarts=3))
        b.wait_state(long, "RUNNING", timeout=60)
        uid = b.status(long)["uid"]
        mine = [p for p in glob.glob(os.path.join(snapshots, "*")) if p.endswith(uid)]
        wait_for(lambda: glob.glob(os.path.join(snapshots, "*" + uid, "snap-*.bin")), 120,
                 "a snapshot of the running job")
        b.signal("w1", signal.SIGKILL)
        b.start_worker("w1", 1, extra=["--snapshot-dir", snapshots])
        b.wait_workers_ready(1)
        # What the killed worker left in its work dir goes when it starts again.
        wait_for(lambda: "removed 1 metrics socket(s) an earlier run of this worker left"
                 in b.logs_of("w1"), 30, "the restarted worker removing the killed one's socket")
        b.wait_state(long, "RUNNING", timeout=120)
        assert glob.glob(os.path.join(snapshots, "*" + uid)), (mine, os.listdir(snapshots))
        b.cli("cancel", long)
    finally:
        shutil.rmtree(snapshots, ignore_errors=True)


def test_an_earlier_clusters_checkpoint_in_the_job_directory_is_not_resumed(make_cluster):
    snapshots = tempfile.mkdtemp(prefix="convoy-e2e-snap-")
    # A checkpoint store the workers share between jobs (--shared-path): a job's checkpoint_dir
    # may name it, never another job's directory.
    team = tempfile.mkdtemp(prefix="convoy-e2e-team-")
    os.chmod(team, 0o755)
    try:
        a = make_cluster(workers=1, slots=2,
                         worker_extra=["--snapshot-dir", snapshots, "--shared-path", team])
        first = a.submit(trainer_spec(nodes=1, max_steps=2000, trainer={
            "model": "fmnist-cnn", "epochs": 1, "batch_size": 32, "max_steps": 2000,
            "checkpoint_every": 10}))
        a.wait_state(first, "RUNNING", timeout=60)
        first_dir = a.job_dir(first)
        ckpts = os.path.join(first_dir, "checkpoints")  # the default checkpoint_dir
        wait_for(lambda: glob.glob(os.path.join(ckpts, "ckpt-*.pt")), 120, "a checkpoint")
        # A second job writes its checkpoints where the user said, a fixed place in the shared
        # store that the next cluster's job of the same spec uses too.
        shared = os.path.join(team, "fmnist-checkpoints")
        second = a.submit(trainer_spec("pinned", nodes=1, max_steps=2000, checkpoint_dir=shared,
                                       trainer={"model": "fmnist-cnn", "epochs": 1,
                                                "batch_size": 32, "max_steps": 2000,
                                                "checkpoint_every": 10}))
        wait_for(lambda: glob.glob(os.path.join(shared, "ckpt-*.pt")), 180, "a pinned checkpoint")
        kill_everything(a, first, second)

        # The same job root (a shared file system, or the default /var/lib/convoy/jobs after a
        # reinstall), a fresh snapshot root: only the checkpoints could be taken.
        fresh = tempfile.mkdtemp(prefix="snap-", dir=a.dir)
        b = second_cluster(make_cluster, fresh, a.job_root, ["--shared-path", team])
        job = b.submit(trainer_spec(nodes=1, max_steps=50))
        assert job == first
        # Its directory is named by its uid: it never sees the other j-000001's.
        assert b.job_dir(job) != first_dir
        assert_trained_from_step_0(b, job, 50, None)
        assert glob.glob(os.path.join(ckpts, "ckpt-*.pt")), "the other job's were touched"
        # Where the user pins a checkpoint_dir both use, the trainer finds the other job's
        # checkpoints and refuses them, naming whose they are.
        pinned = b.submit(trainer_spec("pinned", nodes=1, max_steps=50, checkpoint_dir=shared))
        assert_trained_from_step_0(b, pinned, 50, os.path.join(shared, "ckpt-"))
    finally:
        shutil.rmtree(snapshots, ignore_errors=True)
        shutil.rmtree(team, ignore_errors=True)



def spec_of(name, max_steps, **extra):
    spec = trainer_spec(name, nodes=1, max_steps=max_steps, **extra)
    return spec


def submit_refused(c, spec):
    path = os.path.join(c.dir, f"refused-{spec['name']}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    r = c.cli("submit", path, check=False)
    assert r.returncode != 0, r.stdout
    return r.stderr


def test_resume_from_a_finished_job_starts_at_its_newest_checkpoint(make_cluster):
    """A user resumes on purpose (`resume_from: JOB`): the new job starts from the named
    finished job's newest checkpoint, checked as its own state would be, and says so. A job
    that is not finished or not there, or a path outside the job root, is refused naming the
    field; without resume_from the same settings start at step 0."""
    c = make_cluster(workers=1)
    first_spec = spec_of("first", 40)
    first_spec["trainer"]["checkpoint_every"] = 20
    first = c.submit(first_spec)
    st = c.wait_state(first, {"SUCCEEDED", "FAILED"}, timeout=180)
    assert st["state"] == "SUCCEEDED", st["message"]
    ckpt = os.path.join(c.job_dir(first), "checkpoints", "ckpt-000000000040.pt")
    assert os.path.exists(ckpt), os.listdir(os.path.dirname(ckpt))

    second = c.submit(spec_of("second", 60, resume_from=first))
    st = c.wait_state(second, {"SUCCEEDED", "FAILED"}, timeout=180)
    assert st["state"] == "SUCCEEDED", st["message"]
    said = " ".join(e.get("reason", "") for e in st.get("events", []))
    assert f"starts from the newest checkpoint of job {first}" in said, st
    log = c.logs(second, 0)
    if os.geteuid() == 0:
        # Another identity: the worker copied the first job's checkpoints into its directory
        # (the first job's is its own identity's alone).
        ckpt = os.path.join(c.job_dir(second), "resume-from-" + c.job_dir_name(first),
                            "ckpt-000000000040.pt")
    assert f"resumed from resume_from {ckpt} at epoch 0, step 40" in log, log[-3000:]
    # It trained the 20 steps left, from 41: none of the first job's again.
    csv = c.cli("plot", second, "--output", "csv").stdout
    history = sorted(int(r.split(",")[3]) for r in csv.splitlines()[1:] if r.startswith("0,"))
    assert history and history[0] > 40 and history[-1] == 60, history

    # Without resume_from, the same settings start at step 0 (its own state only).
    third = c.submit(spec_of("third", 10))
    st = c.wait_state(third, {"SUCCEEDED", "FAILED"}, timeout=180)
    assert st["state"] == "SUCCEEDED", st["message"]
    assert "resumed from" not in c.logs(third, 0)

    # Refusals, each naming the field.
    err = submit_refused(c, spec_of("nojob", 10, resume_from="j-999999"))
    assert "resume_from: no job j-999999" in err, err
    running = c.submit(spec_of("long", 100000))
    c.wait_state(running, "RUNNING", timeout=120)
    err = submit_refused(c, spec_of("busy", 10, resume_from=running))
    assert f"resume_from: job {running} is RUNNING" in err, err
    c.cli("cancel", running)
    outside = c.submit(spec_of("outside", 10, resume_from="/etc/passwd"))
    st = c.wait_state(outside, {"FAILED"}, timeout=120)
    assert "resume_from: /etc/passwd is outside the job root" in st["message"], st["message"]

"""A job resumes only its own state (issue 26). Job ids restart at j-000001 on every fresh
state directory, while snapshots in host memory and checkpoints under the job root outlive
a cluster killed -9: a second cluster's j-000001 with the same worker names finds the
first's state under its own id, and must train from step 0 rather than resume another job's
weights."""

import glob
import os
import shutil
import signal
import tempfile

from cluster import Cluster, process_gone, trainer_spec, wait_for


def kill_everything(c, job):
    """Every daemon of cluster `c` and every rank of its `job` killed -9, as a crash would."""
    ranks = c.job_pids(job)
    for name in list(c.procs):
        c.signal(name, signal.SIGKILL)
    for pid in ranks:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    wait_for(lambda: all(process_gone(p) for p in ranks), 10, "the first cluster's ranks gone")


def second_cluster(make_cluster, snapshot_root, job_root=None):
    """A new cluster (fresh state directory: its ids start at j-000001 again) whose one worker
    is named w1, as the first's was, and uses the given snapshot root (and job root: else its
    own)."""
    c = make_cluster(workers=0)
    c.job_root = job_root or c.job_root
    c.start_worker("w1", 1, extra=["--snapshot-dir", snapshot_root])
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

        # Separate job roots: only the snapshots could be taken for this job's own.
        b = second_cluster(make_cluster, snapshots)
        job = b.submit(trainer_spec(nodes=1, max_steps=50))
        assert job == first, "a fresh state directory starts at j-000001 again"
        # The worker keeps each job's snapshots under its cluster id and uid: the new job
        # never sees the old one's (the trainer would refuse them too: the other test).
        assert_trained_from_step_0(b, job, 50, None)
        assert all(os.path.exists(p) for p in left), "another cluster's snapshots were touched"
        # Under <cluster id>-<job uid>, not under the job id.
        assert all(len(os.path.basename(os.path.dirname(p))) == 65 for p in left), left
    finally:
        shutil.rmtree(snapshots, ignore_errors=True)


def test_an_earlier_clusters_checkpoint_in_the_job_directory_is_not_resumed(make_cluster):
    snapshots = tempfile.mkdtemp(prefix="convoy-e2e-snap-")
    try:
        a = make_cluster(workers=1, worker_extra=["--snapshot-dir", snapshots])
        first = a.submit(trainer_spec(nodes=1, max_steps=2000, trainer={
            "model": "fmnist-cnn", "epochs": 1, "batch_size": 32, "max_steps": 2000,
            "checkpoint_every": 10}))
        a.wait_state(first, "RUNNING", timeout=60)
        ckpts = os.path.join(a.job_root, first, "checkpoints")  # the default checkpoint_dir
        wait_for(lambda: glob.glob(os.path.join(ckpts, "ckpt-*.pt")), 120, "a checkpoint")
        kill_everything(a, first)

        # The same job root (a shared file system, or the default /var/lib/convoy/jobs after a
        # reinstall), a fresh snapshot root: only the checkpoint could be taken.
        fresh = tempfile.mkdtemp(prefix="snap-", dir=a.dir)
        b = second_cluster(make_cluster, fresh, a.job_root)
        job = b.submit(trainer_spec(nodes=1, max_steps=50))
        assert job == first
        assert_trained_from_step_0(b, job, 50, os.path.join(ckpts, "ckpt-"))
    finally:
        shutil.rmtree(snapshots, ignore_errors=True)

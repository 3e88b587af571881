"""Issue 17: the ranks of a built-in-trainer job are forked from a warm (pre-loaded)
convoy-trainer on each worker, set up as a cold rank is, and nothing of it outlives its
worker."""

import os
import signal

from cluster import process_gone, trainer_spec, wait_for


def stat_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def parent_of(pid):
    return int(stat_of(pid)[1])


def warm_trainers_of(worker_pid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
            if parent_of(int(entry)) != worker_pid or process_gone(int(entry)):
                continue
        except (OSError, IndexError):
            continue
        if b"--zygote" in cmdline:
            found.append(int(entry))
    return found


def test_ranks_fork_from_the_warm_trainer_which_dies_with_its_worker(make_cluster):
    c = make_cluster(workers=2)
    workers = {name: c.procs[name].pid for name in ("w1", "w2")}
    warm = {name: wait_for(lambda p=pid: warm_trainers_of(p), 30, f"{name}'s warm trainer")
            for name, pid in workers.items()}
    assert all(len(w) == 1 for w in warm.values()), warm
    # Until it has loaded, ranks start cold (the supervisor never waits for it).
    wait_for(lambda: all("warm trainer ready" in c.logs_of(n) for n in workers), 30,
             "the warm trainers loaded")
    job = c.submit(trainer_spec(max_steps=100000))
    c.wait_state(job, "RUNNING", timeout=60)
    ranks = wait_for(lambda: (lambda p: p if len(p) == 2 else None)(c.job_pids(job)), 30,
                     "both ranks")
    by_worker = {}
    for pid in ranks:
        parent = parent_of(pid)
        owner = [name for name, w in warm.items() if parent in w]
        assert owner, f"rank {pid}'s parent {parent} is not a warm trainer"
        by_worker.setdefault(owner[0], []).append(pid)
        # Set up as a cold rank: the job's user (the worker is root: `convoy`), its own
        # process group, the trainer's argv and the rank's environment in /proc.
        with open(f"/proc/{pid}/status") as f:
            uid = [line.split()[1] for line in f if line.startswith("Uid:")][0]
        assert uid != "0"
        assert int(stat_of(pid)[2]) == pid  # process group id
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert b"--zygote" not in f.read()
    assert sorted(by_worker) == ["w1", "w2"], by_worker

    # kill -9 of a worker: its warm trainer and the ranks forked from it die with it.
    c.signal("w1", signal.SIGKILL)
    gone = warm["w1"] + by_worker["w1"]
    wait_for(lambda: all(process_gone(p) for p in gone), 15, "no process of w1 left")
    c.cli("cancel", job)
    c.wait_state(job, "CANCELLED", timeout=60)

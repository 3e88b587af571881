"""A rank (or every rank: --kill all) is killed with SIGKILL; Convoy (a real coordinator and two workers on loopback,
max_restarts 1) against torchrun --max_restarts=1 with bench/torch_ddp.py. Two figures each:

- seconds from the SIGKILL of rank 1 to the restarted attempt's first training step;
- steps lost: the steps the job had completed when rank 1 died minus the step the restarted
  attempt resumes at (steps that are trained twice). Both sides write a disk checkpoint every
  --checkpoint-every steps (Convoy: trainer.checkpoint_every; torch_ddp.py: rank 0's
  torch.save); Convoy also has what convoy-trainer keeps in host memory (snapshots and the
  last will of the surviving rank, issue 17) when the trainer has them.

Rank 1 is killed at the same step on both sides in a run (drawn from --kill-between with a
fixed seed, so that a position within the checkpoint interval is not chosen by hand). Not a
test.

  bench/restart_vs_torchrun [--repeats 3] [--checkpoint-every 100] [--kill rank1|all]
                            [--snapshot-dir auto|worker]
"""

import argparse
import json
import os
import pwd
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CONVOY_BIN_DIR", os.path.join(ROOT, "build/bin"))
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
from cluster import Cluster, trainer_spec, wait_for  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_output import (parse_resumed, parse_step, parse_trainer_resume,  # noqa: E402
                          parse_trainer_step)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def trainer_has_snapshots():
    """True when this convoy-trainer knows --snapshot-dir (issue 17); the older one refuses
    unknown flags, so the bench passes the flag only to a trainer that has it."""
    with open(os.path.join(BIN, "convoy-trainer"), "rb") as f:
        return b"--snapshot-dir" in f.read()


def shared_snapshot_dir():
    """A directory in host memory that the ranks' run-as user can write: what
    CONVOY_SNAPSHOT_DIR gives every rank of a job on a worker. Both workers of this bench run
    on one machine, so they share it."""
    d = tempfile.mkdtemp(prefix="convoy-bench-snap-", dir="/dev/shm")
    if os.geteuid() == 0:
        try:
            u = pwd.getpwnam("convoy")
            os.chown(d, u.pw_uid, u.pw_gid)
        except KeyError:
            pass
    return d


def convoy_once(kill_at, every, snapshot_dir_mode, kill_all):
    c = Cluster(workers=2)
    snap_dir = None
    try:
        extra = ["--log-every", "1"]
        if snapshot_dir_mode == "auto" and trainer_has_snapshots():
            snap_dir = shared_snapshot_dir()
            extra += ["--snapshot-dir", snap_dir]
        job = c.submit(trainer_spec(max_steps=100000, max_restarts=1,
                                    trainer={"model": "fmnist-cnn", "batch_size": 32,
                                             "max_steps": 100000, "epochs": 1,
                                             "checkpoint_every": every, "extra_args": extra}))
        c.wait_state(job, "RUNNING", timeout=60)
        wait_for(lambda: any(m["attempt"] == 0 and int(m["step"]) >= kill_at
                             for m in c.status(job)["latest"]), 120, f"step {kill_at}",
                 interval=0.02)
        pids = [c.rank_pid(job, r) for r in ((0, 1) if kill_all else (1,))]
        t_kill = time.time()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

        def restarted():
            st = c.status(job)
            return [m for m in st["latest"] if m["attempt"] == 1 and int(m["step"]) >= 1]
        wait_for(restarted, 120, "the new attempt's first step", interval=0.02)
        elapsed = time.time() - t_kill

        def resumed():  # rank 0's resume line precedes its first step
            log = c.logs(job, 0, attempt=1)
            if "first step done" not in log:
                return None
            lines = [parse_trainer_resume(line) for line in log.splitlines()]
            return [r for r in lines if r is not None] or [{"step": 0, "source": None}]
        resume = wait_for(resumed, 30, "the restarted rank 0's first step in its log")[0]
        done = 0  # the last step the first attempt completed (every rank completes it)
        for r in (0, 1):
            for line in c.logs(job, r, attempt=0).splitlines():
                parsed = parse_trainer_step(line)
                if parsed is not None:
                    done = max(done, parsed[2])
        c.cli("cancel", job)
        return {"seconds": elapsed, "done": done, "resumed": resume["step"],
                "source": resume.get("source") or ("checkpoint" if resume["step"] else "start")}
    finally:
        c.close()
        if snap_dir:
            shutil.rmtree(snap_dir, ignore_errors=True)


def torchrun_once(kill_at, every, kill_all):
    ckpt_dir = tempfile.mkdtemp(prefix="convoy-bench-torch-ckpt-")
    cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", "--redirects", "2", "--tee", "1",
           "--nproc_per_node", "2",
           "--max_restarts", "1", "--master_port", str(free_port()),
           os.path.join(ROOT, "bench/torch_ddp.py"), "--batch-size", "32", "--no-eval",
           "--threads", "1", "--print-steps", "--checkpoint-every", str(every),
           "--checkpoint-dir", ckpt_dir]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    state = {"done": 0, "resumed": 0, "t_kill": None, "t_restart": None}
    done = threading.Event()
    lines = []

    def reader():
        for line in p.stdout:
            lines.append(line)
            resumed = parse_resumed(line)
            if resumed is not None and resumed[0] == 1:
                state["resumed"] = max(state["resumed"], resumed[2])
            parsed = parse_step(line)  # None for interleaved or malformed lines
            if parsed is not None:
                restart, _, step = parsed
                if restart == 0:
                    state["done"] = max(state["done"], step)
                    if step >= kill_at and state["t_kill"] is None:
                        done.set()
                if restart == 1 and state["t_restart"] is None:
                    state["t_restart"] = time.time()
                    done.set()
    threading.Thread(target=reader, daemon=True).start()
    done.wait(180)
    done.clear()
    victims = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if (b"RANK=1" in env or (kill_all and b"RANK=0" in env)) and b"torch_ddp.py" in cmdline \
                and b"torch.distributed.run" not in cmdline:
            victims.append(int(pid))
    state["t_kill"] = time.time()
    for victim in victims:
        os.kill(victim, signal.SIGKILL)
    done.wait(120)
    time.sleep(0.5)  # the other rank's RESUMED line may follow the first STEP line
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    if state["t_restart"] is None:
        print("torchrun: no step of the restarted attempt within 120 s; its output ended with:\n" +
              "".join(lines[-30:]), file=sys.stderr)
        return {"seconds": float("nan"), "done": state["done"], "resumed": float("nan")}
    return {"seconds": state["t_restart"] - state["t_kill"], "done": state["done"],
            "resumed": state["resumed"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--checkpoint-every", type=int, default=100,
                    help="disk checkpoint interval in steps, both sides")
    ap.add_argument("--kill-between", type=int, nargs=2, default=[200, 300],
                    help="rank 1 is killed once the job has done a step drawn from this range")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--kill", choices=["rank1", "all"], default="rank1",
                    help="rank1: SIGKILL rank 1 (its peer can leave a last will); all: every rank "
                         "at once (no last will: only what was saved before)")
    ap.add_argument("--snapshot-dir", choices=["auto", "worker"], default="worker",
                    help="worker: the worker's CONVOY_SNAPSHOT_DIR (how jobs run); auto: give "
                         "convoy-trainer a host-memory directory with --snapshot-dir (when it has "
                         "the flag), for workers that set none")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    res = {"convoy": [], "torchrun": []}
    for i in range(a.repeats):
        kill_at = rng.randint(*a.kill_between)
        kill_all = a.kill == "all"
        res["convoy"].append(convoy_once(kill_at, a.checkpoint_every, a.snapshot_dir, kill_all))
        res["torchrun"].append(torchrun_once(kill_at, a.checkpoint_every, kill_all))
        cv, tr = res["convoy"][-1], res["torchrun"][-1]
        print(f"run {i + 1} (kill at step >= {kill_at}): "
              f"convoy {cv['seconds']:.2f} s, {cv['done']} steps done, resumed at {cv['resumed']} "
              f"({cv['source']}), lost {cv['done'] - cv['resumed']}; "
              f"torchrun {tr['seconds']:.2f} s, {tr['done']} steps done, resumed at "
              f"{tr['resumed']}, lost {tr['done'] - tr['resumed']}", flush=True)

    def med(xs):  # runs where no restart was seen are NaN: reported above, not counted
        xs = [x for x in xs if x == x]
        return statistics.median(xs) if xs else float("nan")

    c = med([r["seconds"] for r in res["convoy"]])
    t = med([r["seconds"] for r in res["torchrun"]])
    who = "every rank" if a.kill == "all" else "rank 1"
    print(f"\nSIGKILL of {who} -> restarted attempt's first step (median of {a.repeats}): "
          f"convoy {c:.2f} s, torchrun {t:.2f} s, ratio {c / t:.2f}")
    for name in ("convoy", "torchrun"):
        lost = [r["done"] - r["resumed"] for r in res[name]]
        ratio = [(r["done"] - r["resumed"]) / r["done"] for r in res[name] if r["done"]]
        print(f"steps lost, {name} (checkpoint every {a.checkpoint_every} steps): median "
              f"{med(lost):.0f}, per run {lost}; {100 * med(ratio):.2f} % of the steps done "
              f"(max {100 * max([x for x in ratio if x == x] or [float('nan')]):.2f} %)")
    print(json.dumps(res))


if __name__ == "__main__":
    main()

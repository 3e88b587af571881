"""Seconds from SIGKILL of rank 1 to the restarted attempt's first training step: Convoy
(a real coordinator and two workers on loopback, max_restarts 1) vs torchrun
--max_restarts=1 with bench/torch_ddp.py. Both observed the same way: the ranks' own
"first step" report, timestamped by this process as it reads it. Not a test.

  bench/restart_vs_torchrun [--repeats 3]
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CONVOY_BIN_DIR", os.path.join(ROOT, "build/bin"))
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
from cluster import Cluster, rank_pid, trainer_spec, wait_for  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_output import parse_step  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def convoy_once():
    c = Cluster(workers=2)
    try:
        job = c.submit(trainer_spec(max_steps=100000, max_restarts=1,
                                    trainer={"model": "fmnist-cnn", "batch_size": 32,
                                             "max_steps": 100000, "epochs": 1}))
        c.wait_state(job, "RUNNING", timeout=60)
        wait_for(lambda: any(int(m["step"]) > 20 for m in c.status(job)["latest"]), 60, "steps")
        pid = rank_pid(job, 1)
        t_kill = time.time()
        os.kill(pid, signal.SIGKILL)

        def restarted():
            st = c.status(job)
            return [m for m in st["latest"] if m["attempt"] == 1 and int(m["step"]) >= 1]
        wait_for(restarted, 120, "the new attempt's first step", interval=0.02)
        elapsed = time.time() - t_kill
        c.cli("cancel", job)
        return elapsed
    finally:
        c.close()


def torchrun_once():
    cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", "--redirects", "2", "--tee", "1",
           "--nproc_per_node", "2",
           "--max_restarts", "1", "--master_port", str(free_port()),
           os.path.join(ROOT, "bench/torch_ddp.py"), "--batch-size", "32", "--no-eval",
           "--threads", "1", "--print-steps"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    state = {"steps": 0, "t_kill": None, "t_restart": None}
    done = threading.Event()
    lines = []

    def reader():
        for line in p.stdout:
            lines.append(line)
            parsed = parse_step(line)  # None for interleaved or malformed lines
            if parsed is not None:
                restart, _, step = parsed
                if restart == 0 and step > 20 and state["t_kill"] is None:
                    state["steps"] = step
                    done.set()
                if restart == 1 and state["t_restart"] is None:
                    state["t_restart"] = time.time()
                    done.set()
    threading.Thread(target=reader, daemon=True).start()
    done.wait(120)
    done.clear()
    victim = None
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"RANK=1" in env and b"torch_ddp.py" in cmdline and b"torch.distributed.run" not in cmdline:
            victim = int(pid)
    state["t_kill"] = time.time()
    os.kill(victim, signal.SIGKILL)
    done.wait(120)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    if state["t_restart"] is None:
        print("torchrun: no step of the restarted attempt within 120 s; its output ended with:\n" +
              "".join(lines[-30:]), file=sys.stderr)
        return float("nan")
    return state["t_restart"] - state["t_kill"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    res = {"convoy": [], "torchrun": []}
    for i in range(a.repeats):
        res["convoy"].append(convoy_once())
        res["torchrun"].append(torchrun_once())
        print(f"run {i + 1}: convoy {res['convoy'][-1]:.2f} s, torchrun {res['torchrun'][-1]:.2f} s",
              flush=True)
    def med(xs):  # runs where no restart was seen are NaN: reported above, not counted
        xs = [x for x in xs if x == x]
        return statistics.median(xs) if xs else float("nan")

    c, t = med(res["convoy"]), med(res["torchrun"])
    print(f"\nSIGKILL of rank 1 -> restarted attempt's first step (median of {a.repeats}): "
          f"convoy {c:.2f} s, torchrun {t:.2f} s, ratio {c / t:.2f}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()

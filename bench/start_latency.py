"""Where the time goes from `convoy submit` to every rank's first step, and from the SIGKILL of
a rank to the restarted attempt's first step, part by part; side by side with torchrun's launch
-> first step (and restart) of the same training (bench/torch_ddp.py). Not a test.

Convoy: a coordinator and two workers on loopback (1 slot each), the 2 x 1 Fashion-MNIST CNN
job of examples/fmnist-2x1.yaml. The parts come from the job's events (`convoy status -o
json`), the coordinator's and workers' logs and each rank's `startup {...}` line (wall-clock
times of its phases, printed by convoy-trainer at its first step). Every part is measured on
the rank whose first step came last (the critical path). Process start times come from
/proc (10 ms ticks).

  bench/start_latency [--repeats 5] [--json FILE] [--shipped-data]

--shipped-data: the job ships Fashion-MNIST in its code (`submit --code DIR`, trainer.data_dir
"data"), as a user's own data set travels, and torchrun's ranks read the same directory. A
job shipping the same data runs to its end first on the same cluster, so that what is
measured is the second job of a data set on a worker (issue 45: cached by its bytes' hash).
"""

import argparse
import datetime
import glob
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CONVOY_BIN_DIR", os.path.join(ROOT, "build/bin"))
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_output import parse_startup  # noqa: E402
from cluster import Cluster, trainer_spec, wait_for  # noqa: E402

PY = "/usr/bin/python3"
TRAINER = {"model": "fmnist-cnn", "epochs": 1, "batch_size": 32, "lr": 0.01,
           "max_steps": 100000}
_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) \S+ (?:coordinator|worker \S+): (.*)$")
# What a restarted rank says of its resume (trainer/train.cc).
_RESUME_LINE = re.compile(r"^(resume took|resumed from|waited \d+ ms|no checkpoint or snapshot)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_time(text, pattern):
    """Unix time of the first daemon log line whose message matches `pattern`, else None."""
    for line in text.splitlines():
        m = _LOG_LINE.match(_ANSI.sub("", line))
        if m and re.search(pattern, m.group(2)):
            return datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
    return None


def startups(paths):
    """rank -> the startup {...} object found in any of `paths` (rank logs)."""
    out = {}
    for path in paths:
        try:
            with open(path, errors="replace") as f:
                for line in f:
                    s = parse_startup(line)
                    if s is not None:
                        out[s["rank"]] = s
        except OSError:
            pass
    return out


def event_time(job, to, attempt):
    for e in job.get("events", []):
        if e.get("to") == to and int(e.get("attempt", 0)) == attempt:
            return int(e["time_unix_ms"]) / 1000.0
    return None


def trainer_parts(s, launched):
    """The rank-side parts, from the launch message (or torchrun's start) to its first step."""
    parts = [("launch -> process start (fork/exec)", s["start_unix"] - launched),
             ("process start -> main (LibTorch load)", s["main_unix"] - s["start_unix"]),
             ("data load", s["data_unix"] - s["main_unix"]),
             ("model + warm-up", s["model_unix"] - s["data_unix"]),
             ("rendezvous (waits for the slowest rank)", s["rendezvous_unix"] - s["model_unix"])]
    if "resumed_unix" in s:  # trainers since issue 45 say when the resume ended
        return parts + [("resume (the newest state agreed, sent, loaded)",
                         s["resumed_unix"] - s["rendezvous_unix"]),
                        ("first step", s["first_step_unix"] - s["resumed_unix"])]
    return parts + [("first step", s["first_step_unix"] - s["rendezvous_unix"])]


def fills_data_cache():
    """Whether these binaries' workers fill the data cache at start: before issue 45 through
    `convoy-trainer --fill-data-cache` (logged "data cache ..."), since then themselves
    (--prefill-data, logged "data cache ready")."""
    with open(os.path.join(BIN, "convoy-worker"), "rb") as f:
        if b"--prefill-data" in f.read():
            return "data cache ready"
    with open(os.path.join(BIN, "convoy-trainer"), "rb") as f:
        return "data cache" if b"--fill-data-cache" in f.read() else None


def make_shipped_code(dest):
    """A code directory holding the Fashion-MNIST files in data/ (copies: the bytes a user
    ships)."""
    import shutil
    os.makedirs(os.path.join(dest, "data"))
    src = "/usr/share/datasets/fashion-mnist"
    for name in sorted(os.listdir(src)):
        if name.endswith("-ubyte.gz"):
            shutil.copyfile(os.path.join(src, name), os.path.join(dest, "data", name))
    return dest


def convoy_once(steps_before_kill, shipped=None):
    c = Cluster(workers=2)
    try:
        filled = fills_data_cache()
        if filled:
            # A worker that has been up a moment: its data cache is filled (a worker that has
            # just started is still decompressing, and its first ranks wait for that).
            wait_for(lambda: all(filled in c.logs_of(w) for w in ("w1", "w2")), 60,
                     "the workers' data caches")
        # And their warm trainers loaded, where they have them.
        wait_for(lambda: all("warm trainer started" not in c.logs_of(w) or
                             "warm trainer ready" in c.logs_of(w) for w in ("w1", "w2")), 60,
                 "the workers' warm trainers")
        spec_path = os.path.join(c.dir, "spec.json")
        trainer = dict(TRAINER, data_dir="data") if shipped else TRAINER
        code = ["--code", shipped] if shipped else []
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVOY_")}
        env["HOME"] = c.dir
        if shipped:
            # Another job has shipped this data set to these workers before, and ended.
            with open(spec_path, "w") as f:
                json.dump(trainer_spec(name="earlier", max_steps=1, max_restarts=0,
                                       trainer=dict(trainer, max_steps=1)), f)
            r = subprocess.run([os.path.join(BIN, "convoy"), "--coordinator", c.target,
                                "submit", spec_path, "--output", "json"] + code,
                               capture_output=True, text=True, env=env, check=True)
            earlier = json.loads(r.stdout)["job_id"]
            c.jobs.append(earlier)
            st = c.wait_state(earlier, {"SUCCEEDED", "FAILED"}, timeout=180)
            assert st["state"] == "SUCCEEDED", st
        with open(spec_path, "w") as f:
            json.dump(trainer_spec(max_steps=100000, max_restarts=1, trainer=trainer), f)
        t0 = time.time()
        r = subprocess.run([os.path.join(BIN, "convoy"), "--coordinator", c.target, "submit",
                            spec_path, "--output", "json"] + code, capture_output=True, text=True,
                           env=env, check=True)
        t_cli = time.time()
        job_id = json.loads(r.stdout)["job_id"]
        c.jobs.append(job_id)

        def rank_logs(attempt):
            return glob.glob(os.path.join(c.dir, "w*", "jobs", job_id + "-*", f"attempt-{attempt}",
                                          "rank-*.log"))

        def all_started(attempt):
            s = startups(rank_logs(attempt))
            return s if len(s) == 2 else None
        s0 = wait_for(lambda: all_started(0), 120, "both ranks' first step", interval=0.02)
        job = c.status(job_id)
        created = int(job["created_unix_ms"]) / 1000.0
        coord = c.logs_of("coordinator")
        last = max(s0.values(), key=lambda s: s["first_step_unix"])
        launched = log_time(coord, rf"job {job_id}: attempt 0 launched")
        submit = [("CLI start, connect, SubmitJob recorded", created - t0),
                  ("placement", event_time(job, "SCHEDULED", 0) - created),
                  ("master port reservation", launched - event_time(job, "RENDEZVOUS", 0))]
        submit += trainer_parts(last, launched)
        submit.append(("TOTAL submit -> every rank's first step", last["first_step_unix"] - t0))
        submit.append(("(CLI exit after the reply, overlaps)", t_cli - t0))

        # Restart: SIGKILL rank 1 once training runs.
        wait_for(lambda: any(int(m["step"]) >= steps_before_kill
                             for m in c.status(job_id).get("latest", [])), 120, "steps")
        pid = c.rank_pid(job_id, 1)
        t_kill = time.time()
        os.kill(pid, signal.SIGKILL)
        s1 = wait_for(lambda: all_started(1), 120, "the new attempt's first step", interval=0.02)
        job = c.status(job_id)
        coord = c.logs_of("coordinator")
        last = max(s1.values(), key=lambda s: s["first_step_unix"])
        launched = log_time(coord, rf"job {job_id}: attempt 1 launched")
        restarting = event_time(job, "RESTARTING", 0)
        restart = [("SIGKILL -> failure recorded (RESTARTING)", restarting - t_kill),
                   ("teardown of the attempt -> placed again", event_time(job, "SCHEDULED", 1) -
                    restarting),
                   ("master port reservation", launched - event_time(job, "RENDEZVOUS", 1))]
        restart += trainer_parts(last, launched)
        restart.append(("TOTAL SIGKILL -> restarted attempt's first step",
                        last["first_step_unix"] - t_kill))
        for path in sorted(rank_logs(0)) if shipped else []:
            with open(path, errors="replace") as f:
                said = [ln.strip() for ln in f if ln.startswith("data: ")]
            print(f"  {os.path.basename(path)[:-4]}: " + "; ".join(said))
        for path in sorted(rank_logs(1)):
            with open(path, errors="replace") as f:
                said = [ln.strip() for ln in f if _RESUME_LINE.search(ln)]
            print(f"  restarted {os.path.basename(path)[:-4]} on "
                  f"{os.path.relpath(path, c.dir).split(os.sep)[0]}: " + "; ".join(said))
        c.cli("cancel", job_id)
        return submit, restart
    finally:
        c.close()


def torchrun_once(steps_before_kill, shipped=None):
    with tempfile.TemporaryDirectory(prefix="start-latency-torchrun-") as log_dir:
        cmd = [PY, "-m", "torch.distributed.run", "--redirects", "2", "--tee", "1",
               "--log_dir", log_dir, "--nproc_per_node", "2", "--max_restarts", "1",
               "--master_port", str(free_port()), os.path.join(ROOT, "bench/torch_ddp.py"),
               "--batch-size", "32", "--no-eval", "--threads", "1", "--print-startup",
               "--print-steps"]
        if shipped:
            cmd += ["--data-dir", os.path.join(shipped, "data")]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        try:
            def all_started(attempt):
                paths = glob.glob(os.path.join(log_dir, "*", f"attempt_{attempt}", "*",
                                               "stdout.log"))
                s = startups(paths)
                return s if len(s) == 2 else None
            s0 = wait_for(lambda: all_started(0), 120, "torchrun: both ranks' first step",
                          interval=0.02)
            last = max(s0.values(), key=lambda s: s["first_step_unix"])
            launch = [("torchrun start -> rank process start", last["start_unix"] - t0)]
            launch += trainer_parts(last, last["start_unix"])[1:]
            launch.append(("TOTAL launch -> every rank's first step", last["first_step_unix"] - t0))

            time.sleep(steps_before_kill * 0.03)  # about as far into training as Convoy's
            victim = None
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        penv = f.read().split(b"\0")
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read()
                except OSError:
                    continue
                if (b"RANK=1" in penv and b"torch_ddp.py" in cmdline and
                        b"torch.distributed.run" not in cmdline and
                        f"MASTER_PORT={cmd[cmd.index('--master_port') + 1]}".encode() in penv):
                    victim = int(pid)
            t_kill = time.time()
            os.kill(victim, signal.SIGKILL)
            s1 = wait_for(lambda: all_started(1), 120, "torchrun: the restarted attempt's first "
                          "step", interval=0.02)
            last = max(s1.values(), key=lambda s: s["first_step_unix"])
            restart = [("SIGKILL -> new rank process start (detect, stop, respawn)",
                        last["start_unix"] - t_kill)]
            restart += trainer_parts(last, last["start_unix"])[1:]
            restart.append(("TOTAL SIGKILL -> restarted attempt's first step",
                            last["first_step_unix"] - t_kill))
            return launch, restart
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()


def table(title, runs_convoy, runs_torch):
    def medians(runs):
        names = [n for n, _ in runs[0]]
        return names, {n: statistics.median(dict(r)[n] for r in runs) for n in names}
    cn, cm = medians(runs_convoy)
    tn, tm = medians(runs_torch)
    print(f"\n{title} (median of {len(runs_convoy)} runs, seconds)")
    print(f"  {'convoy':58s}{'':>8s}   {'torchrun':52s}")
    rows = max(len(cn), len(tn))
    for i in range(rows):
        left = f"  {cn[i]:52s}{cm[cn[i]]:8.3f}" if i < len(cn) else " " * 62
        right = f"   {tn[i]:48s}{tm[tn[i]]:8.3f}" if i < len(tn) else ""
        print(left + right)
    c_total = cm[[n for n in cn if n.startswith("TOTAL")][0]]
    t_total = tm[[n for n in tn if n.startswith("TOTAL")][0]]
    print(f"  ratio convoy / torchrun: {c_total / t_total:.2f} ({c_total:.2f} s vs {t_total:.2f} s)")
    return {"convoy": cm, "torchrun": tm}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps-before-kill", type=int, default=20)
    ap.add_argument("--json", help="write every run's parts here")
    ap.add_argument("--shipped-data", action="store_true",
                    help="the job ships its data set in its code (see above)")
    a = ap.parse_args()
    code_dir = tempfile.TemporaryDirectory(prefix="start-latency-code-") if a.shipped_data else None
    shipped = make_shipped_code(os.path.join(code_dir.name, "code")) if code_dir else None
    runs = {"convoy_submit": [], "convoy_restart": [], "torchrun_launch": [],
            "torchrun_restart": []}
    for i in range(a.repeats):
        submit, restart = convoy_once(a.steps_before_kill, shipped)
        launch, t_restart = torchrun_once(a.steps_before_kill, shipped)
        runs["convoy_submit"].append(submit)
        runs["convoy_restart"].append(restart)
        runs["torchrun_launch"].append(launch)
        runs["torchrun_restart"].append(t_restart)
        print(f"run {i + 1}: convoy submit {submit[-2][1]:.2f} s, restart {restart[-1][1]:.2f} s; "
              f"torchrun launch {launch[-1][1]:.2f} s, restart {t_restart[-1][1]:.2f} s",
              flush=True)
    table("submit -> every rank's first step", runs["convoy_submit"], runs["torchrun_launch"])
    table("SIGKILL of rank 1 -> the restarted attempt's first step", runs["convoy_restart"],
          runs["torchrun_restart"])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f, indent=1)
    if code_dir:
        code_dir.cleanup()


if __name__ == "__main__":
    main()

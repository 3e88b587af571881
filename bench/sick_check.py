"""Issue 42: how long until a straggler and a hang are named, in steps and seconds, under
Convoy and under torchrun, with the same user DDP script. Not a test.

The job: examples/python/train_ddp.py (the Fashion-MNIST CNN, Gloo on CPU, 32 per rank, one
thread per rank), world size --world (2 or 3), as a user runs it under torchrun and under
Convoy (a coordinator and workers on loopback, --insecure unless --secure, started here). The
only change to the script is the bench's sick host, sick_host.after_step(step), called after
each optimiser step (before the script's report to Convoy), and the process group's timeout
taken from it (--pg-timeout, the same under both; a user sets one, torch's default is 30
minutes). Every rank prints "SICK step <attempt> <rank> <step> <unix time>" there.

1. Straggler: from step --at, the last rank sleeps --factor times its own median step time
   (over the steps before) after each step: its host got that much slower. Convoy (the
   defaults, straggler_factor 1.5 over straggler_steps 20): the slowed steps and the seconds
   from the first slowed step to Job.stragglers (named_unix_ms, at_step), and the rank and
   worker named. torchrun names nothing: the job just runs slower (rank 0's median step time
   after against before), for as many slowed steps as Convoy needed (at least 30).
2. Hang: at step --at the last rank stops stepping in its first attempt (sleeps forever,
   alive) and its peers block in the next all-reduce. Convoy (hang_steps --hang-steps,
   hang_timeout 300 s, max_restarts 1, a spare worker): the seconds, and median step times,
   from the stop to the attempt failing as hung with the suspect named, and to the restarted
   attempt's first step. torchrun (--max_restarts 0): the seconds until a rank's all-reduce
   times out and until torchrun exits, and the rank its summary names as the root cause;
   given --pg-timeout + 90 s at most, then killed.

  /usr/bin/python3 bench/sick_check.py [--repeats 1] [--world 2] [--at 30] [--factor 3]
                                       [--hang-steps 10] [--pg-timeout 60] [--secure]
"""

import argparse
import glob
import json
import os
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
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_output import parse_sick, torchrun_root_cause_rank  # noqa: E402
from cluster import Cluster, wait_for  # noqa: E402

PY = "/usr/bin/python3"
EXAMPLES = os.path.join(ROOT, "examples", "python")
# The user's script, and the two places the bench changes it (each must occur once).
REPORT = "            report(step=step, epoch=epoch, loss=loss.item(), samples=step * len(x) * world)\n"
INIT = 'dist.init_process_group("gloo")'
IMPORT = "import time\n"
SICK_HOST = '''"""bench/sick_check.py's sick host: the one change to the user's script."""
import datetime
import os
import statistics
import time

RANK = int(os.environ.get("RANK", "0"))
ATTEMPT = int(os.environ.get("CONVOY_ATTEMPT", os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
MODE = os.environ.get("SICK_MODE", "")
AT = int(os.environ.get("SICK_AT", "0"))
WHO = int(os.environ.get("SICK_RANK", "-1"))
FACTOR = float(os.environ.get("SICK_FACTOR", "3"))
PG_TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("SICK_PG_TIMEOUT", "1800")))
_ends = []
_extra = None


def after_step(step):
    global _extra
    now = time.time()
    print(f"SICK step {ATTEMPT} {RANK} {step} {now:.3f}", flush=True)
    _ends.append(now)
    if RANK != WHO or ATTEMPT != 0 or step < AT:
        return
    if MODE == "slow":
        if _extra is None:
            recent = _ends[-11:]
            _extra = FACTOR * statistics.median(b - a for a, b in zip(recent, recent[1:]))
            print(f"SICK slow {ATTEMPT} {RANK} {step} {now:.3f} {_extra:.4f}", flush=True)
        time.sleep(_extra)
    elif MODE == "hang" and step == AT:
        print(f"SICK hang {ATTEMPT} {RANK} {step} {now:.3f}", flush=True)
        while True:  # alive, but never steps again
            time.sleep(3600)
'''
RUN_TAG = f"sick-check-{os.getpid()}-{int(time.time())}"  # in every rank's environment


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_code(parent):
    """The user's project under `parent`: train_ddp.py with the sick host, convoy_metrics."""
    with open(os.path.join(EXAMPLES, "train_ddp.py")) as f:
        text = f.read()
    for s in (REPORT, INIT, IMPORT):
        if text.count(s) != 1:
            raise SystemExit(f"examples/python/train_ddp.py changed: {s.strip()!r} is not there "
                             "once; update bench/sick_check.py")
    text = text.replace(IMPORT, IMPORT + "\nimport sick_host  # bench/sick_check.py\n")
    text = text.replace(INIT, 'dist.init_process_group("gloo", timeout=sick_host.PG_TIMEOUT)')
    text = text.replace(REPORT, "            sick_host.after_step(step)\n" + REPORT)
    d = os.path.join(parent, "code")
    os.makedirs(d)
    with open(os.path.join(d, "train_ddp.py"), "w") as f:
        f.write(text)
    with open(os.path.join(d, "sick_host.py"), "w") as f:
        f.write(SICK_HOST)
    shutil.copy(os.path.join(EXAMPLES, "convoy_metrics.py"), d)
    return d


def sick_env(a, mode):
    return {"SICK_MODE": mode, "SICK_AT": str(a.at), "SICK_RANK": str(a.world - 1),
            "SICK_FACTOR": str(a.factor), "SICK_PG_TIMEOUT": str(a.pg_timeout),
            "SICK_BENCH_RUN": RUN_TAG, "OMP_NUM_THREADS": "1"}


def sick_lines(text):
    return [s for s in map(parse_sick, text.splitlines()) if s is not None]


def step_ends(lines, rank, attempt=0):
    """step -> the unix time `rank` ended it."""
    return {s["step"]: s["time"] for s in lines
            if s["what"] == "step" and s["rank"] == rank and s["attempt"] == attempt}


def median_period(ends, first, last):
    """The median time between consecutive step ends for the steps first..last."""
    periods = [ends[k] - ends[k - 1] for k in range(first, last + 1) if k in ends and k - 1 in ends]
    return statistics.median(periods) if periods else float("nan")


def kill_leftovers():
    """SIGKILL any process of this bench's runs still alive (a rank torchrun did not reap)."""
    needle = f"SICK_BENCH_RUN={RUN_TAG}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass


# ---- Convoy

def submit(c, code, a, mode, **extra):
    spec = {"name": mode, "nodes": a.world, "procs_per_node": 1, "backend": "gloo",
            "command": ["python3", "train_ddp.py", "--max-steps", "100000", "--batch-size", "32"],
            "env": {"PATH": "/usr/bin:/bin", **sick_env(a, mode)}, **extra}
    path = os.path.join(c.dir, f"{mode}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    r = c.cli("submit", path, "--code", code, "--output", "json")
    job = json.loads(r.stdout)["job_id"]
    c.jobs.append(job)
    return job


def rank_lines(c, job, attempt):
    lines = []
    for r in range(len(c.status(job)["attempts"][attempt]["nodes"])):
        lines += sick_lines(c.logs(job, r, attempt=attempt))
    return lines


def convoy_straggler(a):
    c = Cluster(workers=a.world, secure=a.secure)
    try:
        job = submit(c, write_code(c.dir), a, "slow")
        slow = a.world - 1

        def named_or_given_up():
            st = c.status(job)
            if st["state"] != "RUNNING" and st["state"] not in ("PENDING", "SCHEDULED",
                                                                 "RENDEZVOUS"):
                raise SystemExit(f"convoy: the straggler job ended {st['state']}: "
                                 f"{st.get('message')}")
            if st.get("stragglers"):
                return st
            steps = [int(m.get("step", 0)) for m in st.get("latest", [])]
            return st if steps and min(steps) >= a.at + a.give_up_steps else None
        st = wait_for(named_or_given_up, 600, "a straggler named", interval=0.25)
        lines = rank_lines(c, job, 0)
        c.cli("cancel", job)
        c.wait_state(job, {"CANCELLED"}, timeout=30)
    finally:
        c.close()
        kill_leftovers()
    start = [s for s in lines if s["what"] == "slow"]
    if not start:
        raise SystemExit("convoy: no 'SICK slow' line in the slow rank's log")
    t0, extra_s = start[0]["time"], start[0]["extra_s"]
    ends = step_ends(lines, 0)
    res = {"extra_s": extra_s, "before_s": median_period(ends, 2, a.at)}
    if not st.get("stragglers"):
        return {**res, "named": False, "steps": a.give_up_steps}
    s = st["stragglers"][0]
    at_step = int(s["at_step"])
    return {**res, "named": True, "steps": at_step - a.at + 1,
            "seconds": int(s["named_unix_ms"]) / 1000 - t0, "rank": s.get("rank", 0),
            "worker": s["worker"], "right": s.get("rank", 0) == slow,
            "ratio": s["step_s"] / s["peers_s"],
            "after_s": median_period(ends, a.at + 1, at_step)}


def event_of_failure(st, attempt):
    for e in st.get("events", []):
        if int(e.get("attempt", 0)) == attempt and e.get("failure"):
            return e
    return None


def convoy_hang(a):
    c = Cluster(workers=a.world + 1, secure=a.secure)  # a spare for the restart
    try:
        job = submit(c, write_code(c.dir), a, "hang", hang_steps=a.hang_steps, hang_timeout=300,
                     max_restarts=1)

        def failed():
            st = c.status(job)
            if st["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                return st
            return st if event_of_failure(st, 0) else None
        st = wait_for(failed, a.pg_timeout + 180, "the first attempt's failure", interval=0.25)
        event = event_of_failure(st, 0)
        first = None
        if st["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED"):
            def restarted():
                try:
                    ends = [s["time"] for s in rank_lines(c, job, 1)
                            if s["what"] == "step" and s["step"] == 1]
                except (AssertionError, IndexError, KeyError):
                    return None  # the attempt is not placed yet
                return max(ends) if len(ends) == a.world else None
            try:
                first = wait_for(restarted, 120, "the restarted attempt's first step",
                                 interval=0.25)
            except AssertionError as e:
                print(f"convoy: {e}", file=sys.stderr)
        lines = rank_lines(c, job, 0)
        st = c.status(job)
        c.cli("cancel", job, check=False)
        c.wait_state(job, {"CANCELLED", "FAILED", "SUCCEEDED"}, timeout=30)
    finally:
        c.close()
        kill_leftovers()
    stop = [s for s in lines if s["what"] == "hang"]
    if not stop or event is None:
        raise SystemExit(f"convoy: no hang line or no failure event; events: {st.get('events')}")
    t0 = stop[0]["time"]
    period = median_period(step_ends(lines, 0), 2, a.at)
    f = event["failure"]
    return {"cause": f.get("cause", ""), "rank": f.get("rank", 0), "worker": f.get("worker", ""),
            "right": f.get("cause") == "FAILURE_HANG" and f.get("rank", 0) == a.world - 1,
            "reason": f.get("reason", ""), "seconds": int(event["time_unix_ms"]) / 1000 - t0,
            "period_s": period, "restart_s": None if first is None else first - t0,
            "moved_to": sorted(n["worker"] for n in st["attempts"][-1]["nodes"])}


# ---- torchrun

class Torchrun:
    """torchrun --nproc_per_node WORLD --max_restarts 0 with the script; its output (its own
    and every rank's stdout, tee'd) read by a thread, each line with the time it came. The
    ranks' stderr goes to files under its --log_dir (with this Python's IntFlag, torch 1.13
    takes --redirects and --tee 1 or 2 only: 0 and 3 map to no stream)."""

    def __init__(self, a, mode):
        self.dir = tempfile.mkdtemp(prefix="convoy-bench-sick-")
        code = write_code(self.dir)
        cmd = [PY, "-m", "torch.distributed.run", "--nproc_per_node", str(a.world),
               "--max_restarts", "0", "--master_port", str(free_port()), "--redirects", "2",
               "--tee", "1", "--log_dir", os.path.join(self.dir, "logs"),
               os.path.join(code, "train_ddp.py"), "--max-steps", "100000", "--batch-size", "32"]
        env = dict(os.environ, PYTHONUNBUFFERED="1", **sick_env(a, mode))
        self.lines = []  # (time, line)
        self.cond = threading.Condition()
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  errors="replace", env=env, cwd=code, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            with self.cond:
                self.lines.append((time.time(), line.rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait(self, predicate, timeout):
        """The first value of predicate(lines) that is not None, else None after `timeout` or
        once torchrun's output has ended."""
        deadline = time.time() + timeout
        with self.cond:
            while True:
                v = predicate(self.lines)
                if v is not None or not self.reader.is_alive() or time.time() >= deadline:
                    return v
                self.cond.wait(min(1.0, max(0.01, deadline - time.time())))

    def sick(self):
        return sick_lines("\n".join(line for _, line in self.lines))

    def close(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except OSError:
            pass
        self.p.wait()
        self.reader.join(10)
        kill_leftovers()
        shutil.rmtree(self.dir, ignore_errors=True)


def torchrun_straggler(a, steps):
    t = Torchrun(a, "slow")
    try:
        last = a.at + max(steps, 30)
        done = t.wait(lambda _: True if step_ends(t.sick(), 0).get(last) else None, 600)
        lines = t.sick()
    finally:
        t.close()
    if not done:
        raise SystemExit("torchrun: rank 0 did not reach step %d; its output ended with:\n%s"
                         % (last, "\n".join(line for _, line in t.lines[-30:])))
    ends = step_ends(lines, 0)
    return {"named": False, "steps": last - a.at + 1, "before_s": median_period(ends, 2, a.at),
            "after_s": median_period(ends, a.at + 1, last)}


def torchrun_hang(a):
    t = Torchrun(a, "hang")
    try:
        stop = t.wait(lambda _: next((s for s in t.sick() if s["what"] == "hang"), None), 600)
        if stop is None:
            raise SystemExit("torchrun: the rank never stopped; its output ended with:\n" +
                             "\n".join(line for _, line in t.lines[-30:]))
        limit = a.pg_timeout + 90
        try:
            t.p.wait(timeout=max(1, stop["time"] + limit - time.time()))
        except subprocess.TimeoutExpired:
            pass
        exited = t.p.poll() is not None
        t_exit = time.time()
        t.reader.join(10)
        text = "\n".join(line for _, line in t.lines)
        # torchrun's own line once a rank has failed and it has stopped the others.
        noticed = next((when for when, line in t.lines if when > stop["time"] and
                        "failed (exitcode:" in line), None)
        timed_out = []  # the ranks whose stderr says a collective timed out
        for path in glob.glob(os.path.join(t.dir, "logs", "**", "stderr.log"), recursive=True):
            with open(path, errors="replace") as f:
                if "Timed out" in f.read():
                    timed_out.append(int(os.path.basename(os.path.dirname(path))))
        period = median_period(step_ends(t.sick(), 0), 2, a.at)
    finally:
        t.close()
    return {"exited": exited, "exit_s": t_exit - stop["time"] if exited else float("nan"),
            "noticed_s": None if noticed is None else noticed - stop["time"],
            "timed_out": sorted(timed_out),
            "root_rank": torchrun_root_cause_rank(text), "limit_s": limit, "period_s": period}


# ---- report

def med(xs):
    xs = [x for x in xs if x is not None and x == x]
    return statistics.median(xs) if xs else float("nan")


def report(a, runs):
    n = len(runs)
    cs = [r["convoy_slow"] for r in runs]
    ts = [r["torch_slow"] for r in runs]
    ch = [r["convoy_hang"] for r in runs]
    th = [r["torch_hang"] for r in runs]
    named = [r for r in cs if r["named"]]
    print(f"\nmedian of {n} run(s), world size {a.world}, sick from step {a.at} on rank "
          f"{a.world - 1} (seconds; steps are the job's)")
    print("| scenario | Convoy: named after | rank named | torchrun | ratio |")
    print("| --- | --- | --- | --- | --- |")
    if named:
        who = ", ".join(sorted({f"rank {r['rank']} on {r['worker']}" for r in named})) + \
            f" ({sum(r['right'] for r in named)}/{n} the slow rank)"
        convoy = (f"{med([r['steps'] for r in named]):.0f} slowed steps, "
                  f"{med([r['seconds'] for r in named]):.1f} s (its steps "
                  f"{1000 * med([r['before_s'] for r in named]):.0f} -> "
                  f"{1000 * med([r['after_s'] for r in named]):.0f} ms)")
    else:
        who, convoy = "none", f"not named within {a.give_up_steps} steps"
    slowdown = med([r["after_s"] / r["before_s"] for r in ts])
    print(f"| straggler (+{a.factor:g}x its step) | {convoy}; {len(named)}/{n} named | {who} | "
          f"not named; the job ran {slowdown:.1f}x slower "
          f"({1000 * med([r['before_s'] for r in ts]):.0f} -> "
          f"{1000 * med([r['after_s'] for r in ts]):.0f} ms a step) for "
          f"{med([r['steps'] for r in ts]):.0f} steps | - |")
    c_s = med([r["seconds"] for r in ch])
    steps = med([r["seconds"] / r["period_s"] for r in ch])
    restart = med([r["restart_s"] for r in ch])
    right = sum(r["right"] for r in ch)
    who = ", ".join(sorted({f"rank {r['rank']} on {r['worker']}" for r in ch}))
    exited = [r for r in th if r["exited"]]
    roots = sorted({str(r["root_rank"]) for r in exited})
    if exited:
        t_s = med([r["exit_s"] for r in exited])
        timed_out = sorted({str(k) for r in exited for k in r["timed_out"]})
        torch = (f"rank(s) {'/'.join(timed_out) or 'none'} timed out in a collective (pg timeout "
                 f"{a.pg_timeout:g} s); torchrun saw a rank fail after "
                 f"{med([r['noticed_s'] for r in exited]):.1f} s, exited after {t_s:.1f} s naming "
                 f"rank {'/'.join(roots)} as the root cause (the stuck rank is {a.world - 1})")
        ratio = f"{c_s / t_s:.2f}"
    else:
        torch, ratio = f"nothing within {th[0]['limit_s']:.0f} s (killed)", "-"
    print(f"| hang (hang_steps {a.hang_steps}: at least 10 s) | {c_s:.1f} s ({steps:.0f} median "
          f"steps of {1000 * med([r['period_s'] for r in ch]):.0f} ms); restart's first step after "
          f"{restart:.1f} s | {who} ({right}/{n} the stuck rank) | {torch} | {ratio} |")
    print(json.dumps(runs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--world", type=int, choices=[2, 3], default=2)
    ap.add_argument("--at", type=int, default=30, help="the step the rank falls sick at")
    ap.add_argument("--factor", type=float, default=3,
                    help="the straggler sleeps this many times its step time each step")
    ap.add_argument("--hang-steps", type=int, default=10)
    ap.add_argument("--pg-timeout", type=float, default=60,
                    help="the script's process group timeout, seconds (both sides)")
    ap.add_argument("--give-up-steps", type=int, default=100,
                    help="Convoy: slowed steps after which the straggler counts as not named")
    ap.add_argument("--secure", action="store_true", help="TLS and tokens, not --insecure")
    a = ap.parse_args()
    if a.at < 12:
        ap.error("--at must be at least 12 (the slow rank times 10 steps before it)")
    runs = []
    for i in range(a.repeats):
        cs = convoy_straggler(a)
        print(f"  convoy, straggler: {json.dumps(cs)}", flush=True)
        ts = torchrun_straggler(a, cs["steps"])
        print(f"  torchrun, straggler: {json.dumps(ts)}", flush=True)
        ch = convoy_hang(a)
        print(f"  convoy, hang: {json.dumps(ch)}", flush=True)
        th = torchrun_hang(a)
        print(f"  torchrun, hang: {json.dumps(th)}", flush=True)
        runs.append({"convoy_slow": cs, "torch_slow": ts, "convoy_hang": ch, "torch_hang": th})
        print(f"run {i + 1}: straggler (+{cs['extra_s']:.3f} s a step): convoy " +
              (f"named rank {cs['rank']} on {cs['worker']} after {cs['steps']} steps, "
               f"{cs['seconds']:.1f} s ({cs['ratio']:.1f}x its peers)" if cs["named"]
               else f"not named within {cs['steps']} steps") +
              f"; torchrun {1000 * ts['before_s']:.0f} -> {1000 * ts['after_s']:.0f} ms a step. "
              f"hang: convoy {ch['cause']} rank {ch['rank']} on {ch['worker']} after "
              f"{ch['seconds']:.1f} s, restarted on {','.join(ch['moved_to'])} "
              f"(first step {ch['restart_s'] or float('nan'):.1f} s); torchrun " +
              (f"exited after {th['exit_s']:.1f} s, root cause rank {th['root_rank']}"
               if th["exited"] else f"still running after {th['limit_s']:.0f} s"), flush=True)
    report(a, runs)


if __name__ == "__main__":
    main()

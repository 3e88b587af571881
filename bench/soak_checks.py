"""The end-of-run checks and the table of bench/soak.py (issue 26).

Each check adds a line to results["violations"] when it fails; the soak passes when there is
none (with --check, memory growth is reported but is no violation)."""

import glob
import os
import re
import stat
import statistics
import time

from bench_output import parse_trainer_resume, summaries

NOT_RESUMING = re.compile(r"not resuming from (\S+?):? (.*)$")
STARTING_AT_0 = "starting at step 0"
# A job's directory under the job root: its id and uid (common/job_paths.h JobDirName).
JOB_DIR = re.compile(r"^j-[0-9]{6}-[0-9a-f]{32}$")


def rank_logs(c, job, uid):
    """{(attempt, rank): text} of every rank log of `job` on every worker of the cluster,
    rotated parts first (WORK/jobs/JOB-UID/attempt-N/rank-R.log, .1, .2)."""
    out = {}
    for path in glob.glob(os.path.join(c.dir, "*", "jobs", f"{job}-{uid}", "attempt-*",
                                       "rank-*.log")):
        attempt = int(os.path.basename(os.path.dirname(path)).split("-")[1])
        rank = int(os.path.basename(path)[5:-4])
        text = ""
        for part in (path + ".2", path + ".1", path):
            try:
                with open(part, errors="replace") as f:
                    text += f.read()
            except OSError:
                pass
        out[(attempt, rank)] = out.get((attempt, rank), "") + text
    return out


def history(c, job):
    """{(rank, attempt): sorted steps} from the coordinator's metric history (`convoy plot -o
    csv`: rank,attempt,epoch,step,time,loss)."""
    r = c.cli("plot", job, "--output", "csv")
    out = {}
    for line in r.stdout.splitlines()[1:]:
        f = line.split(",")
        if len(f) >= 4:
            out.setdefault((int(f[0]), int(f[1])), []).append(int(f[3]))
    return {k: sorted(v) for k, v in out.items()}


def resume_of(text):
    """(step the attempt resumed from or None, [resume dicts], [refusals]) of a rank log."""
    resumes, refused, step = [], [], None
    for line in text.splitlines():
        r = parse_trainer_resume(line)
        if r is not None:
            resumes.append(r)
            step = r["step"]
        elif STARTING_AT_0 in line and step is None:
            step = 0
        m = NOT_RESUMING.search(line)
        if m:
            refused.append(line.strip()[:300])
    return step, resumes, refused


def failure_cause(st):
    """The typed cause of a FAILED job: its last attempt's failure, by kind; None without."""
    attempts = st.get("attempts", [])
    failure = attempts[-1].get("failure") if attempts else None
    if not failure or not failure.get("reason"):
        return None
    exit_ = failure.get("exit", {})
    if exit_.get("signal_name"):
        return f"rank killed by {exit_['signal_name']}"
    if exit_.get("exit_code"):
        return f"rank exited with code {exit_['exit_code']}"
    reason = failure["reason"]
    for key, kind in (("lost", "worker lost"), ("hung", "hung"), ("rendezvous", "rendezvous"),
                      ("max_runtime", "max_runtime")):
        if key in reason:
            return kind
    return "other: " + reason[:60]


def attribute(soak, job, st, a):
    """The injected fault that ended attempt a-1 of `job`: the latest before it ended (up to
    90 s) aimed at the job, one of its workers or the coordinator; None when there is none
    (an elastic growth, a failure of its own)."""
    prev = st["attempts"][a - 1]
    end = int(prev.get("ended_unix_ms", 0)) / 1000 or time.time()
    workers = {n["worker"] for n in prev.get("nodes", [])}
    reasons = " ".join(e.get("reason", "") for e in st.get("events", [])
                       if e.get("attempt", 0) == a - 1)
    best, fallback = None, None
    for f in soak.faults:
        if not end - 90 <= f["t"] <= end + 1:
            continue
        target = f["target"]
        if target == "coordinator":
            # Only when nothing aimed at the job or its workers explains it.
            fallback = f if fallback is None or f["t"] > fallback["t"] else fallback
            continue
        hit = (target == job or target in workers or
               (f["kind"].startswith("preempt") and f"preempted by {target}" in reasons))
        if hit and (best is None or f["t"] > best["t"]):
            best = f
    return best or fallback


def check_job(soak, job, results):
    c = soak.c
    info = soak.jobs[job]
    v = results["violations"]
    st = c.status(job)
    state = st["state"]
    uid = info["uid"] = st.get("uid", "")
    if st.get("attempts"):
        info["last_workers"] = sorted({n["worker"] for n in st["attempts"][-1].get("nodes", [])})
    logs = rank_logs(c, job, uid)
    hist = history(c, job)
    steps = info["steps"]
    own_snapshot = f"{soak.cluster_id}-{uid}"
    own_dir = os.path.join(c.job_root, f"{job}-{uid}", "")
    resume_step = {}
    for (attempt, rank), text in sorted(logs.items()):
        step, resumes, refused = resume_of(text)
        resume_step[(attempt, rank)] = step
        for r in resumes:
            results["resumes"] += 1
            path = r["path"] or ""
            own = (own_snapshot in path.split(os.sep) if r["source"] in ("snapshot", "live")
                   else path.startswith(own_dir))
            if not own:
                v.append(f"{job} (uid {uid}) attempt {attempt} rank {rank} resumed another's "
                         f"state: {r['source']} {path}")
        for line in refused:
            results["refused"].append(f"{job} attempt {attempt} rank {rank}: {line}")
    # No step of an attempt at or before the step its log says it resumed from: that step
    # would be trained twice without a restart documenting it.
    for (rank, attempt), points in sorted(hist.items()):
        s = resume_step.get((attempt, rank), resume_step.get((attempt, 0)))
        if s is None:
            results["unverified"] += 1
            continue
        if points[0] <= s:
            v.append(f"{job} rank {rank} attempt {attempt} resumed at step {s} but trained "
                     f"step {points[0]} again")
    # Steps lost at each restart: the furthest step of the attempt before, minus the step the
    # next one resumed from.
    for a in range(1, st.get("attempt", 0) + 1):
        before = [p[-1] for (r, att), p in hist.items() if att == a - 1]
        if not before:
            continue
        s = resume_step.get((a, 0))
        if s is None:
            continue
        lost = max(0, max(before) - s)
        fault = attribute(soak, job, st, a)
        if fault is None:
            results["restarts_unattributed"].append((job, a, lost))
        else:
            fault.setdefault("lost", []).append(lost)
        _, resumes, _ = resume_of(logs.get((a, 0), ""))
        results["restarts"].append({
            "job": job, "attempt": a, "reached": max(before), "resumed_at": s, "lost": lost,
            "fault": f"{fault['kind']} {fault['target']}" if fault else None,
            "from": f"{resumes[-1]['source']} {resumes[-1]['path']}" if resumes else "step 0",
            "why": st["attempts"][a - 1].get("failure", {}).get("reason") or " / ".join(
                e.get("reason", "") for e in st.get("events", [])
                if e.get("attempt", 0) == a - 1 and "preempt" in e.get("reason", ""))[:200]})
    if state == "SUCCEEDED":
        last = st["attempt"]
        ranks = sorted(r for (r, att) in hist if att == last)
        if not ranks and resume_step.get((last, 0)) != steps:
            # (An attempt that resumed at the last step has nothing left to train: the one
            # before finished but was lost before its exit was heard.)
            v.append(f"{job} SUCCEEDED with no metric record in its last attempt {last}, which "
                     f"resumed at step {resume_step.get((last, 0))}, not its {steps}")
        for r in ranks:
            if hist[(r, last)][-1] != steps:
                v.append(f"{job} SUCCEEDED but rank {r}'s last step is "
                         f"{hist[(r, last)][-1]}, not its {steps}")
        summary = summaries(logs.get((last, 0), ""))
        if not summary or summary[-1].get("steps") != steps:
            v.append(f"{job} SUCCEEDED but rank 0's summary of attempt {last} says "
                     f"{summary[-1] if summary else 'nothing'} (max_steps {steps})")
        outcome = "SUCCEEDED"
    elif state == "FAILED":
        cause = failure_cause(st)
        if cause is None:
            v.append(f"{job} FAILED without a cause: {st.get('message', '')}")
            cause = "no cause"
        outcome = f"FAILED ({cause})"
    else:
        v.append(f"{job} ended {state}: {st.get('message', '')}")
        outcome = state
    results["outcomes"][outcome] = results["outcomes"].get(outcome, 0) + 1
    results["jobs"][job] = {"kind": info["kind"], "state": state, "uid": uid,
                            "attempts": st.get("attempt", 0) + 1,
                            "restarts": st.get("restarts", 0),
                            "preemptions": st.get("preemptions", 0), "outcome": outcome}


def files_under(root, test):
    out = []
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            try:
                if test(p, os.lstat(p)):
                    out.append(p)
            except OSError:
                pass
    return out


def running_leftovers(soak):
    """What finished jobs left while the daemons still run: rank processes, sockets,
    snapshots, temporary files and directories."""
    c = soak.c
    left = []
    for job in soak.jobs:
        for pid in c.job_pids(job):
            left.append(f"process {pid} of {job}")
    left += [f"socket {p}" for p in files_under(c.dir, lambda p, s: stat.S_ISSOCK(s.st_mode))]
    by_uid = {info.get("uid"): job for job, info in soak.jobs.items()}
    for name in soak.worker_ns:
        d = c.snapshot_dir(name)
        if os.path.isdir(d):
            for key in sorted(os.listdir(d)):
                job = by_uid.get(key.rsplit("-", 1)[-1], "no job of this cluster")
                files = len(files_under(os.path.join(d, key), lambda p, s: True))
                last = soak.jobs.get(job, {}).get("last_workers")
                left.append(f"snapshot directory {os.path.join(d, key)} ({files} files) of "
                            f"{job}, finished, on worker {name}" +
                            (f" (its last attempt ran on {', '.join(last)})" if last else ""))
    if os.path.isdir(c.job_root):
        left += [f"temporary {os.path.join(c.job_root, n)}" for n in os.listdir(c.job_root)
                 if not JOB_DIR.match(n)]
    left += [f"temporary {p}" for p in files_under(
        c.dir, lambda p, s: ".tmp" in os.path.basename(p) or
        os.path.basename(p).startswith(("tmp", ".tmp")))]
    return sorted(left)


def new_results(soak):
    return {"violations": [], "outcomes": {}, "jobs": {}, "resumes": 0, "refused": [],
            "unverified": 0, "restarts_unattributed": [], "restarts": [], "leftovers": [],
            "memory": {}, "held": {}, "minutes": soak.args.minutes, "seed": soak.args.seed,
            "job_retention": soak.args.job_retention, "netns": soak.use_netns}


def check_running(soak):
    """Every check that needs the cluster: jobs, identity, leftovers while it runs, memory."""
    c = soak.c
    results = soak.results
    results["cluster_dir"] = c.dir
    unfinished = soak.unfinished() or []
    for j in unfinished:
        results["violations"].append(f"{j['id']} still {j['state']} {soak.args.drain_timeout:.0f} "
                                     f"s after the schedule: {j.get('message', '')}")
    # The jobs not checked yet as they finished (those of the last seconds).
    for job in sorted(soak.jobs):
        if job in soak.checked or job in {j["id"] for j in unfinished}:
            continue
        try:
            check_job(soak, job, results)
        except AssertionError as e:
            results["violations"].append(f"{job} could not be checked (deleted by retention "
                                         f"before the soak saw it finish?): {e}")
        soak.checked.add(job)
    # Leftovers: the workers remove a finished job's snapshots and sockets; give them a
    # moment (a finished job is told to each worker on its next exchange).
    deadline = time.time() + 30
    left = running_leftovers(soak)
    while left and time.time() < deadline:
        time.sleep(2)
        left = running_leftovers(soak)
    results["leftovers"] += left
    results["violations"] += [f"left behind: {x}" for x in left]
    soak.sample(time.time())
    memory(soak, results)
    results["faults"] = soak.faults
    results["duration_s"] = soak.duration_s
    return results


def memory(soak, results):
    """RSS and descriptors of each daemon's last process: at the warm-up point (first sample
    after it) and at the end (the last sample, every job finished)."""
    warm_held = [h for h in soak.held if h[0] >= soak.warmup_at]
    if warm_held:
        results["held"] = {"warm_up": warm_held[0][1], "end": soak.held[-1][1],
                           "most": max(h[1] for h in warm_held)}
    for name in ["coordinator", *soak.worker_ns]:
        pid = soak.c.procs[name].pid
        mine = [s for s in soak.samples if s[1] == name and s[2] == pid]
        warm = [s for s in mine if s[0] >= soak.warmup_at]
        if not warm or len(mine) < 2:
            results["memory"][name] = None
            continue
        w, e = warm[0], mine[-1]
        grew_rss = e[3] / max(w[3], 1) - 1
        grew_fds = e[4] / max(w[4], 1) - 1
        results["memory"][name] = {"rss_kb": [w[3], e[3]], "fds": [w[4], e[4]],
                                   "rss_growth": grew_rss, "fd_growth": grew_fds,
                                   "warm_t": w[0], "end_t": e[0]}
        if not soak.args.check and (grew_rss > 0.10 or grew_fds > 0.10):
            results["violations"].append(
                f"{name}: RSS {w[3] / 1024:.1f} -> {e[3] / 1024:.1f} MB ({grew_rss:+.0%}), "
                f"descriptors {w[4]} -> {e[4]} ({grew_fds:+.0%}) from warm-up to the end")


def check_after_teardown(soak, results, close_leftovers):
    """After teardown: no process of any job, no daemon, no directory or namespace of the
    soak's, and what appeared under /tmp/convoy-* and /dev/shm/convoy-* meanwhile."""
    left = []
    for job, pids in close_leftovers.items():
        left.append(f"processes {pids} of {job} outlived the soak")
    for name, p in soak.c.procs.items():
        if p.poll() is None:
            left.append(f"daemon {name} (pid {p.pid}) still runs")
    for d in (soak.c.dir, soak.c.shm_dir):
        if os.path.exists(d):
            left.append(f"directory {d}")
    if soak.net is not None:
        left += soak.net.left()
    results["violations"] += [f"left after teardown: {x}" for x in left]
    results["leftovers"] += left
    # Other runs on this machine may make these too: reported, not asserted.
    new_tmp = sorted(n for n in set(os.listdir("/tmp")) - soak.before_tmp
                     if n.startswith("convoy-"))
    new_shm = sorted(n for n in (set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm")
                                 else set()) - soak.before_shm if n.startswith("convoy-"))
    results["new_global"] = [f"/tmp/{n}" for n in new_tmp] + [f"/dev/shm/{n}" for n in new_shm]


def report(soak, results):
    """Prints the table; True when there is no violation."""
    out = []
    mode = "n1, n2 in network namespaces" if results["netns"] else "all on loopback"
    out.append(f"soak: {results['duration_s'] / 60:.1f} min wall ({results['minutes']:g} min of "
               f"faults), seed {results['seed']}, secure coordinator + 3 workers ({mode})")
    out.append("")
    out.append("| fault injected | count | restarts it caused | steps lost: median | max |")
    out.append("| --- | ---: | ---: | ---: | ---: |")
    kinds = {}
    for f in soak.faults:
        kinds.setdefault(f["kind"], []).append(f)
    for kind in sorted(kinds):
        fs = kinds[kind]
        restarts = sum(len(f.get("lost", [])) for f in fs)
        lost = [sum(f.get("lost", [])) for f in fs]
        out.append(f"| {kind} | {len(fs)} | {restarts} | {statistics.median(lost):g} | "
                   f"{max(lost)} |")
    other = results["restarts_unattributed"]
    if other:
        lost = [x[2] for x in other]
        out.append(f"| (restarts no injected fault explains) | - | {len(other)} | "
                   f"{statistics.median(lost):g} | {max(lost)} |")
    worst = sorted(results["restarts"], key=lambda r: -r["lost"])[:5]
    if worst and worst[0]["lost"] > 0:
        out.append("")
        out.append("largest losses (steps trained again after a restart):")
        for r in worst:
            if r["lost"] > 0:
                out.append(f"  {r['job']} attempt {r['attempt']}: reached step {r['reached']}, "
                           f"resumed at {r['resumed_at']} from {r['from']} ({r['lost']} lost); "
                           f"fault: {r['fault']}; ended by: {r['why']}")
    out.append("")
    out.append("| jobs by outcome | count |")
    out.append("| --- | ---: |")
    for outcome, n in sorted(results["outcomes"].items()):
        out.append(f"| {outcome} | {n} |")
    jobs = results["jobs"].values()
    kinds_n = {}
    for j in jobs:
        kinds_n[j["kind"]] = kinds_n.get(j["kind"], 0) + 1
    out.append(f"| (of which {', '.join(f'{n} {k}' for k, n in sorted(kinds_n.items()))}; "
               f"{sum(j['restarts'] for j in jobs)} restarts, "
               f"{sum(j['preemptions'] for j in jobs)} preemptions or resizes) | |")
    out.append("")
    out.append(f"identity: {results['resumes']} resumes read from rank logs, "
               f"{sum(1 for v in results['violations'] if 'resumed another' in v)} of another "
               f"job's state; {len(results['refused'])} states refused as not the job's own; "
               f"{results['unverified']} attempt histories without a log to check against")
    for line in results["refused"][:10]:
        out.append(f"  refused: {line}")
    kinds = {}
    for x in results["leftovers"]:
        kind = x.split(" /")[0].split(" (")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    out.append(f"leftovers: {', '.join(f'{n} {k}' for k, n in sorted(kinds.items())) or 'none'}"
               + (" (each in the violations below)" if kinds else "")
               + (f" (new on the machine meanwhile, maybe another run's: "
                  f"{', '.join(results['new_global'])})" if results.get("new_global") else ""))
    out.append("")
    out.append("| daemon | RSS after warm-up | RSS at end | descriptors after warm-up | at end |")
    out.append("| --- | ---: | ---: | ---: | ---: |")
    for name, m in results["memory"].items():
        if m is None:
            out.append(f"| {name} | - | - | - | - |")
            continue
        out.append(f"| {name} | {m['rss_kb'][0] / 1024:.1f} MB | {m['rss_kb'][1] / 1024:.1f} MB "
                   f"({m['rss_growth']:+.0%}) | {m['fds'][0]} | {m['fds'][1]} "
                   f"({m['fd_growth']:+.0%}) |")
    held = results.get("held")
    if held:
        out.append(f"jobs the coordinator held (--job-retention {results['job_retention']}): "
                   f"{held['warm_up']} at the warm-up point, {held['end']} at the end, at most "
                   f"{held['most']} between")
    out.append("")
    if results["violations"]:
        out.append(f"FAILED: {len(results['violations'])} violation(s)")
        out += [f"  {x}" for x in results["violations"]]
    else:
        out.append("PASSED: every check")
    print("\n".join(out), flush=True)
    return not results["violations"]

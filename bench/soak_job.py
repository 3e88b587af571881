"""The soak's small Python job (bench/soak.py ships it with `convoy submit --code`): STEPS steps
of DELAY seconds each, no torch. Each rank keeps its progress in its own file in the job's
directory, stamped with the job's uid (CONVOY_JOB_UID), writes it after every step and resumes
from it, saying so in the lines the built-in trainer uses ("resumed from checkpoint PATH at
epoch 0, step S", "not resuming from PATH: ..."), so the soak checks both kinds of job alike.
A SIGTERM with CONVOY_PREEMPT_FILE written (preemption, drain --now) saves and exits 0;
without it (a teardown) it saves and exits 143.

  python3 soak_job.py STEPS DELAY
"""
import json
import os
import signal
import sys
import time

import convoy_metrics

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def save(path, uid, step):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"uid": uid, "step": step}, f)
    os.replace(tmp, path)


def main():
    steps, delay = int(sys.argv[1]), float(sys.argv[2])
    rank = int(os.environ.get("RANK", "0"))
    uid = os.environ.get("CONVOY_JOB_UID", "")
    path = os.path.abspath(f"progress-rank{rank}.json")
    signal.signal(signal.SIGTERM, on_term)
    step = 0
    try:
        with open(path) as f:
            state = json.load(f)
    except (OSError, ValueError):
        state = None
    if state is None:
        print("no checkpoint or snapshot to resume from: starting at step 0", flush=True)
    elif state.get("uid") != uid:
        print(f"not resuming from {path}: it belongs to job {state.get('uid')}, "
              f"not this job ({uid})", file=sys.stderr, flush=True)
    else:
        step = int(state["step"])
        print(f"resumed from checkpoint {path} at epoch 0, step {step} (sample 0 of the epoch)",
              flush=True)
    while step < steps:
        if stop:
            preempt = os.environ.get("CONVOY_PREEMPT_FILE", "")
            if preempt and os.path.exists(preempt):
                print(f"preempted at step {step}: checkpoint {path}", flush=True)
                sys.exit(0)
            print(f"stopped by SIGTERM at step {step}", flush=True)
            sys.exit(143)
        time.sleep(delay)
        step += 1
        convoy_metrics.report(kind="step", step=step, epoch=0, loss=1.0 / step, samples=step)
        save(path, uid, step)
    print(f'summary {{"rank": {rank}, "world": {os.environ.get("WORLD_SIZE", "1")}, '
          f'"steps": {step}}}', flush=True)


if __name__ == "__main__":
    main()

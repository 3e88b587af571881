"""Parsers of what the benchmarks read from training processes' output.

torchrun --tee prefixes each line of a rank with "[default<R>]:", and two ranks writing at
once can interleave inside one line ("13[default0]:STEP 0 0 14"). Every parser here matches
a whole line, anchored at both ends, and returns None (or skips the line) for anything else:
a malformed line costs one sample, never the run.
"""

import json
import re

# torchrun's tee prefix, e.g. "[default1]:"; absent on convoy-trainer's own output.
_PREFIX = r"(?:\[[A-Za-z0-9_.-]+\]:)?"
_NUM = r"[0-9]+(?:\.[0-9]+)?"

_STEP = re.compile(r"^" + _PREFIX + r"STEP ([0-9]+) ([0-9]+) ([0-9]+)$")
_SUMMARY = re.compile(r"^" + _PREFIX + r"summary (\{[^{}]*\})$")
_ACCURACY = re.compile(r"^" + _PREFIX + r"rank ([0-9]+) epoch ([0-9]+): test accuracy (" + _NUM +
                       r")%(?: \(loss " + _NUM + r"\))? at (" + _NUM + r") s$")
_STARTUP = re.compile(r"^" + _PREFIX + r"startup (\{[^{}]*\})$")
_RESUMED = re.compile(r"^" + _PREFIX + r"RESUMED ([0-9]+) ([0-9]+) ([0-9]+)$")
# convoy-trainer's progress line (every --log-every steps).
_TRAINER_STEP = re.compile(r"^rank ([0-9]+) epoch ([0-9]+) step ([0-9]+)/([0-9]+) loss \S+ "
                           r"[0-9]+ samples/s$")
# convoy-trainer's resume line: since issue 16 "resumed from snapshot|checkpoint <path> at
# epoch E, step S (sample P of the epoch)" (since issue 45 also "live", the live state), before
# it "resumed at epoch E, step S".
_TRAINER_RESUME = re.compile(r"^resumed (?:from (snapshot|checkpoint|live) (\S.*) )?at epoch "
                             r"([0-9]+), step ([0-9]+)(?: \(sample ([0-9]+) of the epoch\))?$")


def parse_step(line):
    """(restart, rank, step) of a "STEP <restart> <rank> <step>" line, else None."""
    m = _STEP.match(line.strip())
    return tuple(int(g) for g in m.groups()) if m else None


def _json_object(m):
    if not m:
        return None
    try:
        obj = json.loads(m.group(1))
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def summaries(text):
    """The JSON objects of every well-formed "summary {...}" line, in order."""
    out = []
    for line in text.splitlines():
        obj = _json_object(_SUMMARY.match(line.strip()))
        if obj is not None:
            out.append(obj)
    return out


def parse_accuracy(line):
    """(rank, epoch, accuracy %, seconds) of a test-accuracy line, else None."""
    m = _ACCURACY.match(line.strip())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))


def parse_startup(line):
    """The JSON object of convoy-trainer's "startup {...}" line, else None."""
    return _json_object(_STARTUP.match(line.strip()))


def parse_resumed(line):
    """(restart, rank, step) of torch_ddp.py's "RESUMED <restart> <rank> <step>", else None."""
    m = _RESUMED.match(line.strip())
    return tuple(int(g) for g in m.groups()) if m else None


def parse_trainer_step(line):
    """(rank, epoch, step) of convoy-trainer's "rank R epoch E step S/T loss L N samples/s"."""
    m = _TRAINER_STEP.match(line.strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def parse_trainer_resume(line):
    """{"source", "path", "epoch", "step", "sample"} of convoy-trainer's resume line (source,
    path and sample are None in the older form), else None."""
    m = _TRAINER_RESUME.match(line.strip())
    if not m:
        return None
    return {"source": m.group(1), "path": m.group(2), "epoch": int(m.group(3)),
            "step": int(m.group(4)), "sample": None if m.group(5) is None else int(m.group(5))}


# bench/sick_check.py's sick host (its sick_host.py, the one change to the user's script):
# "SICK step|slow|hang <attempt> <rank> <step> <unix time>", a slow line ending with the extra
# seconds the slow rank sleeps each step.
_SICK = re.compile(r"^" + _PREFIX + r"SICK (step|slow|hang) ([0-9]+) ([0-9]+) ([0-9]+) (" + _NUM +
                   r")(?: (" + _NUM + r"))?$")
# torchrun's failure summary (ChildFailedError): "Root Cause (first observed failure):", then
# "[0]:", "time : ...", "host : ...", "rank : 0 (local_rank: 0)".
_ROOT_CAUSE = re.compile(r"^\s*Root Cause \(first observed failure\):\s*$")
_SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*([0-9]+) \(local_rank: [0-9]+\)\s*$")


def parse_sick(line):
    """{"what", "attempt", "rank", "step", "time", "extra_s"} of a "SICK ..." line (extra_s: a
    slow line's sleep, else None), else None."""
    m = _SICK.match(line.strip())
    if not m or (m.group(1) == "slow") != (m.group(6) is not None):
        return None
    return {"what": m.group(1), "attempt": int(m.group(2)), "rank": int(m.group(3)),
            "step": int(m.group(4)), "time": float(m.group(5)),
            "extra_s": None if m.group(6) is None else float(m.group(6))}


def torchrun_root_cause_rank(text):
    """The rank torchrun's failure summary names as the root cause (the first rank listed
    after "Root Cause (first observed failure):"), else None."""
    seen = False
    for line in text.splitlines():
        if _ROOT_CAUSE.match(line):
            seen = True
        elif seen:
            m = _SUMMARY_RANK.match(line)
            if m:
                return int(m.group(1))
    return None

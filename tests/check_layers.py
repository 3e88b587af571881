#!/usr/bin/env python3
"""Checks that each folder includes only what its layer may use (README "Inside the
coordinator" and "Inside the worker"). Prints every include that breaks a rule, naming the file, the line and the rule,
and exits 1; exits 0 when there is none.

  python3 tests/check_layers.py [ROOT]
"""
import os
import re
import sys

# What the sources of each folder may include from this repository (beyond their own folder
# and common/; proto headers are everyone's; spec/, the job spec contract, is everyone's but
# common/'s). A folder not named here may include anything.
MAY_USE = {
    "coordinator/state": set(),
    "coordinator/store": set(),
    "coordinator/sched": {"coordinator/state"},
    "coordinator/control": {"coordinator/state", "coordinator/store", "coordinator/sched"},
    "coordinator/rpc": {"coordinator/state", "coordinator/store", "coordinator/sched",
                        "coordinator/control"},
    # The web UI: what rpc/ uses, and of rpc/ only auth.h (the same rights and redaction).
    "coordinator/web": {"coordinator/state", "coordinator/store", "coordinator/sched",
                        "coordinator/control", "coordinator/rpc/auth.h"},
    "coordinator/server": {"coordinator/state", "coordinator/store", "coordinator/sched",
                           "coordinator/control", "coordinator/rpc", "coordinator/web"},
    "common": set(),
    "spec": set(),
    "rank_process": set(),  # the rank child and the zygote protocol: worker's and trainer's
    # The worker's layers, lowest first (worker/CMakeLists.txt); nothing lives in worker/ itself.
    "worker": set(),
    "worker/host": set(),
    "worker/files": {"worker/host"},
    "worker/exec": {"worker/host", "rank_process"},
    "worker/link": {"worker/host"},
    "worker/supervise": {"worker/host", "worker/files", "worker/exec", "worker/link",
                         "rank_process"},
    "worker/daemon": {"worker/host", "worker/files", "worker/exec", "worker/link",
                      "worker/supervise", "rank_process"},
    "client": set(),
    "trainer": {"rank_process"},
}
# Folders whose headers are ours (an include of one is checked); anything else is a library.
OURS = ("coordinator/", "common/", "spec/", "rank_process/", "worker/", "client/", "trainer/")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    """The most specific folder of MAY_USE that holds `path` (relative, with /)."""
    best = None
    for folder in MAY_USE:
        if path.startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


def check(root):
    problems = []
    for top in ("coordinator", "common", "spec", "rank_process", "worker", "client", "trainer"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                mine = folder_of(path)
                if mine is None:
                    continue
                with open(os.path.join(root, path), errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or not m.group(1).startswith(OURS):
                            continue
                        target = folder_of(m.group(1)) or m.group(1).split("/")[0]
                        if target in (mine, "common") or target in MAY_USE[mine] \
                                or m.group(1) in MAY_USE[mine]:  # one file of a layer
                            continue
                        if target == "spec" and mine != "common":
                            continue
                        allowed = ", ".join(sorted(MAY_USE[mine] | {"common"} |
                                                   (set() if mine == "common" else {"spec"})))
                        problems.append(f"{path}:{number}: includes {m.group(1)}, but {mine}/ "
                                        f"may use only {allowed}")
    return problems


def self_test():
    """The checker can fail: a state/ file including a controller, a worker file including
    the coordinator, a worker layer including one above it (exec/ the loop, link/ the
    launcher) and a file left in worker/ itself are reported; an allowed include is not."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="check-layers-") as root:
        def write(path, text):
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        write("coordinator/state/a.h", '#include "coordinator/control/b.h"\n#include "common/x.h"\n')
        write("coordinator/control/b.h", '#include "coordinator/state/a.h"\n')
        write("worker/c.cc", '#include <vector>\n#include "coordinator/control/b.h"\n')
        # The web layer may include rpc/auth.h, and no other file of rpc/.
        write("coordinator/web/d.cc",
              '#include "coordinator/rpc/auth.h"\n#include "coordinator/rpc/grpc_service.h"\n')
        write("worker/exec/d.cc", '#include "worker/host/e.h"\n#include "worker/supervise/f.h"\n')
        write("worker/link/g.h", '#include "worker/exec/d.h"\n')
        write("worker/supervise/f.h", '#include "worker/files/h.h"\n#include "worker/link/g.h"\n'
              '#include "rank_process/zygote_protocol.h"\n')
        write("worker/daemon/i.cc", '#include "worker/supervise/f.h"\n#include "spec/x.h"\n')
        write("worker/files/j.cc", '#include "rank_process/rank_child.h"\n')
        problems = sorted(check(root))
        assert len(problems) == 6, problems
        assert problems[0].startswith("coordinator/state/a.h:1:"), problems
        assert problems[1].startswith("coordinator/web/d.cc:2:"), problems
        assert problems[2].startswith("worker/c.cc:2:"), problems
        assert problems[3].startswith("worker/exec/d.cc:2:"), problems
        assert "worker/exec/ may use only" in problems[3], problems
        assert problems[4].startswith("worker/files/j.cc:1:"), problems
        assert problems[5].startswith("worker/link/g.h:1:"), problems
    print("self-test: violations are found")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) break the layering", file=sys.stderr)
        return 1
    print("layers: every include is allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

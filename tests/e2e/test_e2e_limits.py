"""Issue 27, enforced limits: each rank runs in a cgroup of its own under its worker's, with
its job's memory_per_proc, cpus_per_proc and the worker's --pids-per-rank. A rank that
allocates past its memory is killed by the kernel there, the job's root cause names the OOM
kill and the limit, and a neighbour job on the same worker SUCCEEDS. A worker without
cgroups refuses a job that sets limits, naming the field."""
import os

import pytest

from cluster import wait_for, worker_cgroup_dirs

# Touches 16 MiB at a time (pages written, not only reserved) up to 1 GiB.
HOG = ("import sys\n"
       "chunks = []\n"
       "for i in range(64):\n"
       "    chunks.append(b'x' * (16 << 20))\n"
       "    print('allocated', (i + 1) * 16, 'MiB', flush=True)\n"
       "print('survived', flush=True)\n")


def limits_enforced(c, name="w1"):
    return "limits enforced" in c.logs_of(name)


def test_a_rank_past_its_memory_is_oom_killed_and_named_and_its_neighbour_succeeds(
        make_cluster):
    if os.geteuid() != 0:
        pytest.skip("cgroups need a root worker; this test is not root")
    c = make_cluster(workers=1, slots=2)
    if not limits_enforced(c):
        pytest.skip("this host has no usable cgroup hierarchy: " + c.logs_of("w1")[-500:])
    # The neighbour: no limit, runs through the hog's OOM kill, and says where it ran.
    neighbour = c.submit({"name": "neighbour", "nodes": 1, "procs_per_node": 1,
                          "max_restarts": 0, "command": [
                              "sh", "-c", "cat /proc/self/cgroup; i=0; "
                              "while [ $i -lt 600 ] && [ ! -e done ]; do sleep 0.1; "
                              "i=$((i+1)); done; echo neighbour-fine"]})
    wait_for(lambda: c.status(neighbour)["state"] == "RUNNING", 60, "the neighbour running")
    hog = c.submit({"name": "hog", "nodes": 1, "procs_per_node": 1, "max_restarts": 0,
                    "memory_per_proc": "128Mi", "command": ["python3", "-c", HOG],
                    "env": {"PATH": "/usr/bin:/bin"}})
    st = c.wait_state(hog, {"SUCCEEDED", "FAILED"}, timeout=120)
    log = c.logs(hog, 0)
    assert st["state"] == "FAILED", (st, log)
    assert "survived" not in log
    assert "killed by the kernel OOM killer at its 128 MiB memory_per_proc" in st["message"], st
    failure = st["attempts"][-1]["failure"]
    assert failure["exit"]["oom_killed"] and int(failure["exit"]["memory_limit_bytes"]) == 128 << 20, \
        failure
    # The neighbour ran in its own group (not the hog's, not the worker's) and is untouched.
    assert c.status(neighbour)["state"] == "RUNNING"
    open(os.path.join(c.job_dir(neighbour), "done"), "w").close()
    st = c.wait_state(neighbour, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert st["state"] == "SUCCEEDED", st["message"]
    nlog = c.logs(neighbour, 0)
    assert "neighbour-fine" in nlog
    memory_line = [ln for ln in nlog.splitlines() if ":memory:" in ln or ln.startswith("0::")]
    assert memory_line and memory_line[0].endswith(
        "/" + c.job_dir_name(neighbour) + "/attempt-0/rank-0"), nlog
    # Both ranks' groups are gone once they ended; the worker's base stays while it runs.
    bases = worker_cgroup_dirs("w1", os.path.join(c.dir, "w1"))
    assert bases, "the worker's cgroups are not where it says"
    for base in bases:
        def empty():
            return not [d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d))]
        wait_for(empty, 10, f"the ranks' groups under {base} removed")


def test_a_worker_without_cgroups_refuses_a_job_that_sets_limits(make_cluster):
    c = make_cluster(workers=1, worker_extra=["--cgroups", "off"])
    assert "limits are not enforced (--cgroups off)" in c.logs_of("w1")
    job = c.submit({"name": "limited", "nodes": 1, "procs_per_node": 1, "max_restarts": 0,
                    "memory_per_proc": "256Mi", "command": ["true"]})
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert st["state"] == "FAILED", st
    assert "memory_per_proc: worker w1 cannot enforce limits (--cgroups off)" in st["message"], st
    # Without limits the same worker runs it.
    ok = c.submit({"name": "unlimited", "nodes": 1, "procs_per_node": 1, "max_restarts": 0,
                   "command": ["true"]})
    assert c.wait_state(ok, {"SUCCEEDED", "FAILED"}, timeout=60)["state"] == "SUCCEEDED"

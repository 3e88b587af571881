"""Issue 18, "Your own script": `convoy submit --code DIR` ships a directory to every worker
(unpacked into the job's directory, where the command starts), a spec may come from standard
input or from the command line, and examples/python/train_ddp.py runs through Convoy."""

import json
import os
import shutil
import stat
import tempfile

import pytest

from test_e2e_security import job_uid

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python")
HAVE_TORCH = os.path.exists("/usr/lib/python3/dist-packages/torch")
PATH_ENV = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}


@pytest.fixture
def code_dir():
    """The user's project: outside every worker's work dir and the job root."""
    d = tempfile.mkdtemp(prefix="convoy-code-")
    for f in ("train_ddp.py", "convoy_metrics.py"):
        shutil.copy(os.path.join(EXAMPLES, f), d)
    with open(os.path.join(d, ".convoyignore"), "w") as f:
        f.write("# not shipped\n*.log\nsecret/\n")
    with open(os.path.join(d, "junk.log"), "w") as f:
        f.write("x")
    os.makedirs(os.path.join(d, "secret"))
    with open(os.path.join(d, "secret", "key"), "w") as f:
        f.write("x")
    os.makedirs(os.path.join(d, "pkg"))
    with open(os.path.join(d, "pkg", "data.txt"), "w") as f:
        f.write("shipped\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs Debian's python3-torch")
def test_python_example_shipped_with_code_runs_on_two_nodes(make_cluster, code_dir):
    c = make_cluster(workers=2, secure=True)
    spec = os.path.join(code_dir, "job.json")
    with open(spec, "w") as f:
        json.dump({"name": "own-script", "nodes": 2, "procs_per_node": 1, "backend": "gloo",
                   "command": ["python3", "train_ddp.py", "--max-steps", "5",
                               "--batch-size", "32"],
                   "env": PATH_ENV}, f)
    r = c.cli("submit", spec, "--code", code_dir, "--output", "json")
    job = json.loads(r.stdout)["job_id"]
    c.jobs.append(job)
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=300)
    assert st["state"] == "SUCCEEDED", (st["message"], c.logs(job, 0), c.logs(job, 1))
    assert "test accuracy" in c.logs(job, 0)
    job_dir = c.job_dir(job)
    shipped = os.path.join(job_dir, "train_ddp.py")
    assert os.stat(shipped).st_uid == job_uid(c, job)
    assert stat.S_IMODE(os.stat(shipped).st_mode) & 0o007 == 0
    with open(os.path.join(job_dir, "pkg", "data.txt")) as f:
        assert f.read() == "shipped\n"
    assert not os.path.exists(os.path.join(job_dir, "junk.log"))  # .convoyignore
    assert not os.path.exists(os.path.join(job_dir, "secret"))
    # Stored once on the coordinator, by hash, readable by its owner only, with who uploaded
    # it (a job names only its owner's code).
    stored = sorted(os.listdir(os.path.join(c.dir, "state", "code")))
    assert len(stored) == 2 and stored[0].endswith(".owners") and \
        stored[1] == stored[0][:-len(".owners")] + ".tar.gz", stored
    for name in stored:
        assert stat.S_IMODE(os.stat(os.path.join(c.dir, "state", "code", name)).st_mode) == 0o600
    # The same code again: nothing new stored.
    job2 = json.loads(c.cli("submit", "--code", code_dir, "--nodes", "1", "--output", "json",
                            "--", "sh", "-c", "ls pkg").stdout)["job_id"]
    c.jobs.append(job2)
    assert c.wait_state(job2, {"SUCCEEDED", "FAILED"}, timeout=60)["state"] == "SUCCEEDED"
    assert c.logs(job2, 0) == "data.txt\n"
    assert sorted(os.listdir(os.path.join(c.dir, "state", "code"))) == stored


def test_submit_without_a_spec_file_and_from_stdin(make_cluster):
    c = make_cluster(workers=2)
    r = c.cli("submit", "--nodes", "2", "--procs-per-node", "1", "--output", "json", "--",
              "sh", "-c", "echo rank=$RANK of $WORLD_SIZE args=$0", "--epochs")
    job = json.loads(r.stdout)["job_id"]
    c.jobs.append(job)
    assert c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)["state"] == "SUCCEEDED"
    assert c.logs(job, 1) == "rank=1 of 2 args=--epochs\n"

    import subprocess
    from cluster import BIN
    r = subprocess.run([os.path.join(BIN, "convoy"), "--coordinator", c.target, "submit", "-"],
                       input="name: piped\nnodes: 1\nprocs_per_node: 1\ncommand: [echo, hi]\n",
                       capture_output=True, text=True, timeout=30, env={"HOME": c.dir})
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip()
    c.jobs.append(job)
    assert c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=60)["state"] == "SUCCEEDED"
    assert c.logs(job, 0) == "hi\n"
    # Neither a file nor a command: a usage error.
    r = c.cli("submit", check=False)
    assert r.returncode == 2 and "command after '--'" in r.stderr, r.stderr


@pytest.mark.skipif(not HAVE_TORCH, reason="needs Debian's python3-torch")
def test_a_rank_raising_under_record_is_the_root_cause(make_cluster, tmp_path):
    c = make_cluster(workers=1)
    (tmp_path / "fail.py").write_text(
        "import os\n"
        "from torch.distributed.elastic.multiprocessing.errors import record\n"
        "@record\n"
        "def main():\n"
        "    assert os.environ['TORCHELASTIC_ERROR_FILE'].endswith('rank-0.error.json')\n"
        "    raise ValueError('learning rate 7.5 is too large')\n"
        "if __name__ == '__main__':\n"
        "    main()\n")
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "raises", "nodes": 1, "procs_per_node": 1,
                                "command": ["python3", "fail.py"], "env": PATH_ENV}))
    job = json.loads(c.cli("submit", str(spec), "--code", str(tmp_path), "--output",
                           "json").stdout)["job_id"]
    c.jobs.append(job)
    st = c.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=120)
    assert st["state"] == "FAILED"
    text = json.dumps(st)
    assert "raised ValueError: learning rate 7.5 is too large" in text, text
    assert "error_traceback" in text and "in main" in text, text
    shown = c.cli("status", job).stdout
    assert "raised ValueError: learning rate 7.5 is too large" in shown, shown
    assert "traceback (TORCHELASTIC_ERROR_FILE)" in shown, shown

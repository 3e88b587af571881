"""README.md's "Using it" block, run as it stands (issue 32): the shell block is extracted
from the README and run line by line with bash -e, with only these substitutions so that it
cannot touch the machine's own state: the coordinator's state directory and the workers'
work directories point into a scratch directory, port 7070 becomes a free port, the worker
names are made unique (their snapshot directories are /dev/shm/convoy-NAME), and HOME is
the scratch directory (`convoy login` writes ~/.config/convoy/config.yaml), as is
CONVOY_STATE_DIR (what `token create` uses without --state-dir). The job must
reach SUCCEEDED and every command must exit 0; afterwards no process of the block and no
file of it outside the scratch directory may remain."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from cluster import BIN, free_port, job_pids, wait_for

README = os.path.join(os.path.dirname(__file__), "../../README.md")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))


def using_it_block():
    text = open(README).read()
    section = text[text.index("\n## Using it\n"):]
    section = section[:section.index("\n## ", 1)]
    m = re.search(r"```sh\n(.*?)```", section, re.S)
    assert m, "README's 'Using it' section has no ```sh block"
    return m.group(1)


def test_readme_block_parses_and_names_what_it_substitutes():
    block = using_it_block()
    # What the substitutions below rely on: if the README changes these, the test must too.
    for needle in ("/var/lib/convoy", "/var/lib/convoy-worker", "7070", "w1", "w2",
                   "examples/fmnist-2x1.yaml --watch"):
        assert needle in block, needle
    # No placeholder a user would have to replace by hand.
    for placeholder in ("HOST:", "SHA256:...", "<", "..."):
        assert placeholder not in block, f"placeholder {placeholder!r} in the README block"


def test_readme_block_runs_to_succeeded():
    scratch = tempfile.mkdtemp(prefix="convoy-readme-")
    # The ranks (user convoy) must pass through it to the workers' directories.
    os.chmod(scratch, 0o711)
    port = free_port()
    suffix = f"{os.getpid() % 100000}"
    names = {"w1": f"rd{suffix}a", "w2": f"rd{suffix}b"}
    script = using_it_block()
    script = script.replace("/var/lib/convoy-worker", os.path.join(scratch, "worker"))
    script = script.replace("/var/lib/convoy", os.path.join(scratch, "state"))
    script = script.replace("0.0.0.0:7070", f"127.0.0.1:{port}").replace("7070", str(port))
    for old, new in names.items():
        script = re.sub(rf"\b{old}\b", new, script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVOY_")}
    # `token create` without --state-dir uses the default, /var/lib/convoy: the same
    # substitution through the variable that stands in for the flag.
    env.update(HOME=scratch, PATH=os.path.abspath(BIN) + ":" + env.get("PATH", ""),
               NO_COLOR="1", COLUMNS="100", CONVOY_STATE_DIR=os.path.join(scratch, "state"))
    defaults = ("/var/lib/convoy", "/var/lib/convoy-worker")
    existed = {d: os.path.exists(d) for d in defaults}
    log_path = os.path.join(scratch, "readme.log")
    proc = None
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-x", "-c", script],
                                    cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=600)
            except subprocess.TimeoutExpired:
                rc = None
        out = open(log_path, errors="replace").read()
        assert rc == 0, f"the README block exited {rc}:\n{out[-6000:]}"
        # submit --watch ended with the job SUCCEEDED and its accuracy.
        assert re.search(r"SUCCEEDED", out), out[-6000:]
        assert re.search(r"accuracy", out), out[-6000:]
        # The drain and undrain of an admin went through (exit 0 above), and the second job
        # was cancelled and then deleted without "try again".
        assert "try again" not in out, out[-6000:]
        # The worker's job directories are apart from its own and from the state directory.
        for name in names.values():
            wd = os.path.join(scratch, "worker", name)
            assert os.path.isdir(os.path.join(wd, "job-root")), os.listdir(wd)
        assert not os.path.exists(os.path.join(scratch, "state", "jobs"))
    finally:
        # The block leaves its daemons running in the background, as a user's shell would:
        # stop them (workers stop their ranks on SIGTERM), then make sure nothing is left.
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except OSError:
                pass
            deadline = time.time() + 20
            while time.time() < deadline:
                try:
                    os.killpg(proc.pid, 0)
                except OSError:
                    break
                time.sleep(0.2)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        leftovers = {job: job_pids(job, root=scratch) for job in ("j-000001", "j-000002")}
        for pids in leftovers.values():
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
        for name in names.values():
            shutil.rmtree(f"/dev/shm/convoy-{name}", ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    assert not any(leftovers.values()), f"ranks outlived the README's daemons: {leftovers}"
    for d in defaults:
        assert os.path.exists(d) == existed[d], f"the test touched the default path {d}"

"""deploy/container/Dockerfile builds an image from the Debian package on a Debian 12 base made
from the same apt archive this machine uses (mmdebstrap), and the coordinator in it answers
--version. Needs podman and mmdebstrap (Debian packages) and a machine where podman can run
containers; otherwise skips with the reason. The base is cached under .cache/ so that a CI
run pays for it once; set CONVOY_IMAGE_TEST=0 to skip."""
import glob
import os
import shutil
import subprocess

import pytest

from deploy_util import BUILD, DEPLOY, ROOT, run

CACHE = os.path.join(ROOT, ".cache", "image")


def test_image_builds_and_answers_version(tmp_path):
    if os.environ.get("CONVOY_IMAGE_TEST") == "0":
        pytest.skip("CONVOY_IMAGE_TEST=0")
    for tool in ("podman", "mmdebstrap"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (apt-get install podman mmdebstrap)")
    if os.geteuid() != 0:
        pytest.skip("rootful podman only here")
    os.makedirs(CACHE, exist_ok=True)
    base = os.path.join(CACHE, "debian12.tar")
    if not os.path.exists(base):
        tmp = os.path.join(CACHE, "tmp-debian12.tar")
        try:
            # The name must end in .tar: mmdebstrap picks its output format by it.
            r = run(["mmdebstrap", "--variant=apt", "bookworm", tmp], timeout=240)
        except subprocess.TimeoutExpired:
            pytest.skip("mmdebstrap took over 4 minutes (slow archive): image not built")
        if r.returncode != 0:
            pytest.skip(f"mmdebstrap cannot make a Debian 12 base here: {r.stderr[-800:]}")
        os.rename(tmp, base)
    r = run(["podman", "import", base, "localhost/convoy-base:12"], timeout=120)
    if r.returncode != 0:
        pytest.skip(f"podman cannot import an image here: {r.stderr[-800:]}")
    r = run(["cpack", "-G", "DEB", "-B", str(tmp_path)], cwd=BUILD, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    context = tmp_path / "context"
    context.mkdir()
    shutil.copy(os.path.join(DEPLOY, "container", "Dockerfile"), context)
    for deb in glob.glob(str(tmp_path / "convoy_*_amd64.deb")):
        shutil.copy(deb, context)
    # chroot isolation: RUN steps need no OCI runtime (crun refuses some machines' cgroups).
    r = run(["podman", "build", "--isolation=chroot", "--network=host", "--build-arg", "BASE=localhost/convoy-base:12", "-t",
             "localhost/convoy:test", str(context)], timeout=600)
    if r.returncode != 0 and ("newuidmap" in r.stderr or "mount" in r.stderr
                              or "cgroup" in r.stderr or "overlay" in r.stderr):
        pytest.skip(f"podman cannot build containers on this machine: {r.stderr[-800:]}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    try:
        r = run(["podman", "run", "--rm", "--network=none", "localhost/convoy:test"], timeout=120)
        if r.returncode != 0 and "OCI" in r.stderr:
            # No container runtime here (crun: "cgroups in hybrid mode not supported",
            # setrlimit refused): run the image's command in its file system instead.
            print(f"podman run impossible here ({r.stderr.strip()[-200:]}); chroot instead")
            m = run(["podman", "image", "mount", "localhost/convoy:test"], timeout=60)
            assert m.returncode == 0, m.stderr
            try:
                r = run(["chroot", m.stdout.strip(), "/usr/bin/convoy-coordinator", "--version"])
            finally:
                run(["podman", "image", "unmount", "localhost/convoy:test"], timeout=60)
        assert r.returncode == 0 and r.stdout.startswith("convoy-coordinator "), r.stdout + r.stderr
    finally:
        run(["podman", "rmi", "-f", "localhost/convoy:test"], timeout=120)

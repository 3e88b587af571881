"""The Debian package: `cpack -G DEB` builds convoy_<version>_amd64.deb with the binaries,
units, conffiles and maintainer scripts; `dpkg -i` installs it on this machine, the installed
binaries answer --version and --check-config with the installed config, and `dpkg --purge`
leaves no file of the package behind (the file lists before and after are compared).

Changes the machine (root only). What scripts/install-deps.sh made beforehand (the convoy
user, /var/lib/convoy/jobs) must survive the purge: the postinst keeps what exists and the
purge removes /var/lib/convoy only when the package made it."""
import glob
import os
import pwd
import re
import shutil
import subprocess

import pytest

from deploy_util import BUILD, run

WATCHED = ["/usr/bin", "/lib/systemd/system", "/etc/convoy", "/var/lib/convoy",
           "/var/lib/convoy-worker", "/usr/share/doc/convoy", "/etc/passwd", "/etc/group"]


def snapshot():
    files = set()
    for top in WATCHED:
        if os.path.isfile(top):
            with open(top) as f:
                files |= {f"{top}: {line.strip()}" for line in f}
            continue
        r = run(["find", top, "-xdev"])
        files |= set(r.stdout.split())
    return files


def test_package_installs_runs_and_purges(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("dpkg -i needs root")
    for tool in ("cpack", "dpkg", "dpkg-deb", "dpkg-shlibdeps"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed")
    if run(["dpkg-query", "-W", "convoy"]).returncode == 0:
        pytest.skip("a convoy package is installed already; not touching it")

    r = run(["cpack", "-G", "DEB", "-B", str(tmp_path)], cwd=BUILD, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    debs = glob.glob(str(tmp_path / "convoy_*_amd64.deb"))
    assert len(debs) == 1, os.listdir(tmp_path)
    deb = debs[0]
    assert re.fullmatch(r"convoy_\d+\.\d+\.\d+_amd64\.deb", os.path.basename(deb))

    contents = run(["dpkg-deb", "--contents", deb]).stdout
    for path in ("./usr/bin/convoy", "./usr/bin/convoy-coordinator", "./usr/bin/convoy-worker",
                 "./lib/systemd/system/convoy-coordinator.service",
                 "./lib/systemd/system/convoy-worker.service", "./etc/convoy/coordinator.yaml",
                 "./etc/convoy/worker.yaml", "./usr/lib/convoy/convoy-forkserver.py"):
        assert re.search(rf" {re.escape(path)}$", contents, re.M), f"{path} not in the package"
    if os.path.exists(os.path.join(BUILD, "bin", "convoy-trainer")):
        assert " ./usr/bin/convoy-trainer" in contents
    control = run(["dpkg-deb", "--field", deb, "Depends"]).stdout
    assert "libgrpc++" in control and "adduser" in control, control  # shlibdeps ran
    conffiles = run(["dpkg-deb", "--ctrl-tarfile", deb], text=False).stdout
    assert b"/etc/convoy/coordinator.yaml" in conffiles

    before = snapshot()
    user_before = _user("convoy")
    try:
        r = run(["dpkg", "-i", deb], timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        r = run(["/usr/bin/convoy", "--version"])
        assert r.returncode == 0 and r.stdout.startswith("convoy "), r.stdout + r.stderr
        r = run(["/usr/bin/convoy-coordinator", "--check-config", "--config",
                 "/etc/convoy/coordinator.yaml"])
        assert r.returncode == 0 and "configuration OK" in r.stdout, r.stdout + r.stderr
        assert _user("convoy") is not None, "postinst made no convoy user"
        if shutil.which("systemd-analyze"):  # the installed units, binaries where they name them
            r = run(["systemd-analyze", "verify", "--man=no",
                     "/lib/systemd/system/convoy-coordinator.service",
                     "/lib/systemd/system/convoy-worker.service"])
            assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
        assert os.path.isdir("/var/lib/convoy")
        # The postinst is idempotent: configuring again changes nothing and succeeds.
        r = run(["dpkg-reconfigure", "-fnoninteractive", "convoy"])
        assert r.returncode == 0, r.stderr
    finally:
        r = run(["dpkg", "--purge", "convoy"], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    after = snapshot()
    added = after - before
    if user_before is None:  # made by the postinst; kept on purge by design (postrm)
        added = {f for f in added if not re.match(r"/etc/(passwd|group): convoy:", f)}
    assert added == set(), f"left behind: {sorted(added)}"
    assert before - after == set(), f"removed what was there before: {sorted(before - after)}"
    if user_before is not None:
        assert _user("convoy") == user_before, "the purge changed a user it did not create"


def _user(name):
    try:
        p = pwd.getpwnam(name)
        return (p.pw_uid, p.pw_gid, p.pw_dir)
    except KeyError:
        return None

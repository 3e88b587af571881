"""A small reader of systemd unit files and a runner that starts a unit's ExecStart the way
systemd would on a machine whose PID 1 is not systemd: as the unit's User, with its
Environment=/EnvironmentFile=, its StateDirectory= made, its CapabilityBoundingSet= and
NoNewPrivileges= applied through setpriv, and NOTIFY_SOCKET for Type=notify."""
import os
import pwd
import shlex
import socket
import subprocess


def parse_unit(*paths):
    """{(section, key): [values]} of the unit and its drop-ins, in order (an empty
    assignment resets a list, as systemd does)."""
    out = {}
    for path in paths:
        section = None
        with open(path) as f:
            lines = f.read().replace("\\\n", " ").splitlines()
        for line in lines:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            key, value = key.strip(), value.strip()
            if value == "":
                out[(section, key)] = []
            else:
                out.setdefault((section, key), []).append(value)
    return out


def one(unit, key, section="Service", default=None):
    values = unit.get((section, key))
    return values[-1] if values else default


def expand(value):
    """systemd specifiers used by Convoy's units."""
    return value.replace("%H", socket.gethostname()).replace("%%", "%")


def environment(unit, path_map):
    """The environment systemd gives the service: a minimal base, User='s variables,
    Environment= then EnvironmentFile= (later wins)."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    user = one(unit, "User", default="root")
    pw = pwd.getpwnam(user)
    env.update(USER=user, LOGNAME=user, HOME=pw.pw_dir, SHELL=pw.pw_shell)
    for assignment in unit.get(("Service", "Environment"), []):
        for word in shlex.split(assignment):
            k, _, v = word.partition("=")
            env[k] = expand(v)
    for ef in unit.get(("Service", "EnvironmentFile"), []):
        optional = ef.startswith("-")
        ef = path_map(ef.lstrip("-"))
        if not os.path.exists(ef):
            assert optional, f"EnvironmentFile {ef} is missing and not optional"
            continue
        with open(ef) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    k, _, v = line.partition("=")
                    env[k.strip()] = v.strip().strip('"')
    return env


CAPS = {"CAP_SETUID": "setuid", "CAP_SETGID": "setgid", "CAP_KILL": "kill", "CAP_CHOWN": "chown",
        "CAP_DAC_OVERRIDE": "dac_override", "CAP_FOWNER": "fowner"}


def command(unit, path_map):
    """argv: setpriv (user, groups, capability bounding set, no_new_privs), then ExecStart
    with its paths mapped."""
    user = one(unit, "User", default="root")
    argv = ["setpriv", f"--reuid={user}", f"--regid={pwd.getpwnam(user).pw_gid}", "--init-groups"]
    caps = one(unit, "CapabilityBoundingSet")
    if caps is not None or ("Service", "CapabilityBoundingSet") in unit:
        names = (caps or "").split()
        argv.append("--bounding-set=" + ",".join(["-all"] + ["+" + CAPS[c] for c in names]))
    if one(unit, "NoNewPrivileges") == "yes":
        argv.append("--no-new-privs")
    exec_start = unit[("Service", "ExecStart")]
    assert len(exec_start) == 1, exec_start
    return argv + [path_map(w) for w in shlex.split(expand(exec_start[0]))]


def make_state_directories(unit, var_lib):
    """StateDirectory=: <var_lib>/<dir>, owned by User, StateDirectoryMode (0755)."""
    user = pwd.getpwnam(one(unit, "User", default="root"))
    mode = int(one(unit, "StateDirectoryMode", default="0755"), 8)
    for d in (one(unit, "StateDirectory") or "").split():
        path = os.path.join(var_lib, d)
        os.makedirs(path, exist_ok=True)
        os.chown(path, user.pw_uid, user.pw_gid)
        os.chmod(path, mode)


def start(unit, path_map, log_path, extra_env=None):
    env = environment(unit, path_map)
    env.update(extra_env or {})
    log = open(log_path, "ab")
    return subprocess.Popen(command(unit, path_map), env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)

"""What the deploy tests share: where the binaries and the deploy/ tree are, free ports."""
import os
import socket
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")
BIN = os.environ.get("CONVOY_BIN_DIR", os.path.join(ROOT, "build", "bin"))
BUILD = os.environ.get("CONVOY_BUILD_DIR", os.path.dirname(BIN))
DAEMONS = ("convoy-coordinator", "convoy-worker")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(argv, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 60)
    return subprocess.run(argv, **kw)

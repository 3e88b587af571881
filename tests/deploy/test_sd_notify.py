"""convoy-coordinator speaks systemd's notification protocol (Type=notify, WatchdogSec=):
READY=1 once it serves, then WATCHDOG=1 while its ticker runs, STOPPING=1 on SIGTERM. The test
is systemd: it binds the NOTIFY_SOCKET datagram socket and reads what arrives."""
import os
import signal
import socket
import subprocess
import tempfile

from deploy_util import BIN, free_port


def test_ready_then_watchdog_then_stopping():
    with tempfile.TemporaryDirectory(prefix="convoy-notify-") as d:
        path = os.path.join(d, "notify.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(30)
        env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="300000")
        env.pop("WATCHDOG_PID", None)
        port = free_port()
        p = subprocess.Popen([os.path.join(BIN, "convoy-coordinator"), "--insecure",
                              "--listen", f"127.0.0.1:{port}",
                              "--state-dir", os.path.join(d, "state")],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            messages = []
            while not any("WATCHDOG=1" in m for m in messages):
                messages.append(sock.recv(4096).decode())
            assert "READY=1" in messages[0], messages
            assert f"127.0.0.1:{port}" in messages[0]  # STATUS=serving on ...
            # The port serves by the time READY=1 is sent.
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
            # More than one: the watchdog is fed periodically.
            while sum("WATCHDOG=1" in m for m in messages) < 3:
                messages.append(sock.recv(4096).decode())
            p.send_signal(signal.SIGTERM)
            while not any("STOPPING=1" in m for m in messages):
                messages.append(sock.recv(4096).decode())
            assert p.wait(timeout=30) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            sock.close()


def test_no_notify_socket_is_a_no_op():
    """Without NOTIFY_SOCKET (not under systemd) the coordinator starts and stops as before."""
    with tempfile.TemporaryDirectory(prefix="convoy-notify-") as d:
        env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
        port = free_port()
        p = subprocess.Popen([os.path.join(BIN, "convoy-coordinator"), "--insecure",
                              "--listen", f"127.0.0.1:{port}",
                              "--state-dir", os.path.join(d, "state")],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            import time
            deadline = time.time() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.time() < deadline, "the coordinator never listened"
                    time.sleep(0.1)
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=30) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()

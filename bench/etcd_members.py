"""Real etcd members (Debian's etcd-server) on loopback ports, for the HA tests and
bench/failover.py: started as one new cluster, killed (with their session) by close()."""
import os
import signal
import socket
import subprocess
import time

ETCD = "/usr/bin/etcd"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EtcdMembers:
    def __init__(self, root, members=3):
        self.root = root
        self.names = [f"e{i}" for i in range(members)]
        self.client = [free_port() for _ in self.names]
        self.peer = [free_port() for _ in self.names]
        self.procs = {}
        self.cluster = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(self.names, self.peer))
        for i in range(members):
            self.start(i)

    def start(self, i):
        """Starts member i (again, after kill(i): on its data, it rejoins the cluster)."""
        name = self.names[i]
        log = open(os.path.join(self.root, name + ".log"), "ab")
        self.procs[name] = subprocess.Popen([
            ETCD, f"--name={name}", f"--data-dir={os.path.join(self.root, name)}",
            f"--listen-client-urls=http://127.0.0.1:{self.client[i]}",
            f"--advertise-client-urls=http://127.0.0.1:{self.client[i]}",
            f"--listen-peer-urls=http://127.0.0.1:{self.peer[i]}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{self.peer[i]}",
            f"--initial-cluster={self.cluster}", "--initial-cluster-state=new",
            f"--initial-cluster-token={os.path.basename(self.root)}",
            # A job's metric history is one value of up to 2.6 MB (etcd_job_store.h).
            "--max-request-bytes=8388608", "--heartbeat-interval=50",
            "--election-timeout=500"], stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)

    def kill(self, i):
        """kill -9 of member i."""
        p = self.procs[self.names[i]]
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)

    def wait_healthy(self, timeout=30):
        """Until every member answers `etcdctl endpoint health` (True), or `timeout` s."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = subprocess.run(["etcdctl", "--endpoints", self.endpoints(), "endpoint",
                                "health"], capture_output=True, text=True, timeout=30,
                               env={**os.environ, "ETCDCTL_API": "3"})
            if r.returncode == 0:
                return True
            time.sleep(0.2)
        return False

    def endpoints(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.client)

    def url(self):
        return "etcd://" + self.endpoints()

    def get(self, key, timeout=10):
        """The value of `key` (etcdctl), or None."""
        r = subprocess.run(["etcdctl", "--endpoints", self.endpoints(), "get", key,
                            "--print-value-only"], capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, "ETCDCTL_API": "3"})
        value = r.stdout.strip()
        return value if r.returncode == 0 and value else None

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)

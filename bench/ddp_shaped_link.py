"""DDP across a slow link (issue 31): two network namespaces on this machine, each joined to
the root namespace by a veth whose both ends are shaped with `tc tbf` (no netem here: rate
only, no added delay), one Convoy worker in each (a secure coordinator in the root namespace)
and torchrun in both (static rendezvous, --nnodes 2). The 2 x 1 Fashion-MNIST CNN job, batch
32 per rank, `allreduce: gloo` (shared memory would cross the namespaces: /dev/shm is
shared), one intra-op thread per rank.

For each link rate, alternating, --repeats times:
- Convoy with each `trainer.compression` option (none, bf16, fp16, powersgd, auto);
- torchrun + bench/torch_ddp.py with no hook, with fp16_compress_hook and with PowerSGD
  (PowerSGDState + powerSGD_hook, the same rank and start step: `powersgd` at Convoy's
  explicit rank, `powersgd4` at the rank `auto` picks). bf16_compress_hook is not run:
  Debian's torch 1.13 Gloo refuses bfloat16 all-reduces ("Invalid scalar type").

Prints samples/s and test accuracy (after the run: one epoch with --steps 0) as medians, with
the ratios against torchrun without a hook and against torchrun with the same hook (for
`auto`, the hook of what it chose), and the share of Convoy's communication hidden behind
backward. Measures
each link's TCP throughput first. Removes the namespaces, links and processes afterwards.
Needs root. Not a test: it asserts nothing.

  bench/ddp_shaped_link [--rates 1gbit,10gbit] [--steps 0] [--repeats 3]
                        [--options none,bf16,fp16,powersgd,auto]
                        [--torch none,fp16,powersgd,powersgd4]
"""

import argparse
import glob
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CONVOY_BIN_DIR", os.path.join(ROOT, "build/bin"))
PY = "/usr/bin/python3"
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
from cluster import Cluster, trainer_spec  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_output import summaries  # noqa: E402

NS = ["cvb-a", "cvb-b"]
HOST_IF = ["cvbh0", "cvbh1"]
NS_IF = ["cvbn0", "cvbn1"]
POWERSGD_RANK = 2
POWERSGD_START = 10
AUTO_POWERSGD_RANK = 4  # kAutoPowerSgdRank in trainer/options.h
# torchrun's hook for each Convoy option (for `auto`: for what it chose): the fair comparison.
SAME_HOOK = {"none": "none", "bf16": "fp16", "fp16": "fp16", "powersgd": "powersgd"}
AUTO_SAME_HOOK = dict(SAME_HOOK, powersgd="powersgd4")


def host_addr(i):
    return f"10.213.{i}.1"


def ns_addr(i):
    return f"10.213.{i}.2"


def sh(*cmd, check=True):
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True)


class Links:
    """The namespaces and veths; shape(rate) (re)applies tbf on all four ends."""

    def __init__(self):
        self.forward = None

    def __enter__(self):
        self.teardown()  # what an interrupted run left
        for i, ns in enumerate(NS):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", HOST_IF[i], "type", "veth", "peer", "name", NS_IF[i])
            sh("ip", "link", "set", NS_IF[i], "netns", ns)
            sh("ip", "addr", "add", host_addr(i) + "/24", "dev", HOST_IF[i])
            sh("ip", "link", "set", HOST_IF[i], "up")
            sh("ip", "-n", ns, "addr", "add", ns_addr(i) + "/24", "dev", NS_IF[i])
            sh("ip", "-n", ns, "link", "set", NS_IF[i], "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "route", "add", "default", "via", host_addr(i))
        with open("/proc/sys/net/ipv4/ip_forward") as f:
            self.forward = f.read().strip()
        with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
            f.write("1")
        return self

    def shape(self, rate):
        for i, ns in enumerate(NS):
            for prefix, dev in ((["ip", "netns", "exec", ns], NS_IF[i]), ([], HOST_IF[i])):
                subprocess.run(prefix + ["tc", "qdisc", "del", "dev", dev, "root"],
                               capture_output=True)
                if rate != "unshaped":
                    subprocess.run(prefix + ["tc", "qdisc", "add", "dev", dev, "root", "tbf",
                                             "rate", rate, "burst", "256kb", "latency", "20ms"],
                                   check=True, capture_output=True)

    def teardown(self):
        for i, ns in enumerate(NS):
            subprocess.run(["ip", "link", "del", HOST_IF[i]], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def __exit__(self, *exc):
        self.teardown()
        if self.forward is not None and self.forward != "1":
            # Another namespace set-up on this machine may route through the root namespace
            # too: forwarding goes back off only when none is left.
            if sh("ip", "netns", "list", check=False).stdout.strip():
                print("note: net.ipv4.ip_forward left at 1: other network namespaces exist",
                      file=sys.stderr)
            else:
                with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
                    f.write(self.forward)


def measure_throughput(seconds=2.0):
    """One TCP stream from namespace a to namespace b, in Mbit/s."""
    recv = subprocess.Popen(
        ["ip", "netns", "exec", NS[1], PY, "-c",
         "import socket,sys\n"
         "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
         f"s.bind(('{ns_addr(1)}', 5599)); s.listen(1); print('up', flush=True)\n"
         "c,_=s.accept(); n=0\n"
         "while True:\n"
         "    b=c.recv(1<<20)\n"
         "    if not b: break\n"
         "    n+=len(b)\n"
         "print(n)"], stdout=subprocess.PIPE, text=True)
    recv.stdout.readline()
    send = subprocess.run(
        ["ip", "netns", "exec", NS[0], PY, "-c",
         "import socket,time\n"
         f"s=socket.create_connection(('{ns_addr(1)}', 5599)); buf=b'x'*(1<<20)\n"
         f"t=time.time()\n"
         f"while time.time()-t<{seconds}: s.sendall(buf)\n"
         "s.shutdown(socket.SHUT_WR); print(time.time()-t)"],
        capture_output=True, text=True, check=True)
    n = int(recv.communicate(timeout=60)[0].strip())
    return n * 8 / float(send.stdout.strip()) / 1e6


class ConvoyCluster:
    """A secure coordinator in the root namespace (listening on every address; its
    certificate names the veths' host ends) and one worker per namespace."""

    def __init__(self):
        c = Cluster(workers=0, secure=True, worker_timeout=10)
        self.c = c
        try:
            c.signal("coordinator", 9)
            c.target = f"0.0.0.0:{c.port}"
            c.coordinator_extra = ["--tls-san", host_addr(0), "--tls-san", host_addr(1)]
            c.start_coordinator()
            c.target = f"127.0.0.1:{c.port}"
            time.sleep(0.5)
            for i, ns in enumerate(NS):
                name = f"n{i}"
                c._spawn(name, ["ip", "netns", "exec", ns, os.path.join(BIN, "convoy-worker"),
                                "--coordinator", f"{host_addr(i)}:{c.port}", "--name", name,
                                "--advertise-address", ns_addr(i), "--slots", "1",
                                "--work-dir", os.path.join(c.dir, name),
                                "--job-root", c.job_root,
                                "--snapshot-dir", c.snapshot_dir(name),
                                "--join-token", c.join_token,
                                "--ca-fingerprint", c.fingerprint])
            c.wait_workers_ready(2, timeout=60)
        except BaseException:
            c.close()
            raise

    def run(self, compression, steps, timeout):
        trainer = {"allreduce": "gloo", "compression": compression, "snapshot_every": 0,
                   "powersgd_rank": POWERSGD_RANK, "powersgd_start_step": POWERSGD_START}
        spec = trainer_spec(name=f"shaped-{compression}", max_steps=steps,
                            env={"OMP_NUM_THREADS": "1"})
        if steps == 0:
            del spec["trainer"]["max_steps"]
        else:
            # A short run measures throughput only: the test-set pass would weigh on it.
            spec["trainer"]["extra_args"] = ["--no-eval"]
        spec["trainer"].update(trainer)
        job = self.c.submit(spec)
        st = self.c.wait_state(job, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=timeout)
        out = "".join(self.c.logs(job, r) for r in (0, 1))
        if st["state"] != "SUCCEEDED":
            print(f"convoy {compression}: {st['state']}\n{out[-2000:]}", file=sys.stderr)
            return None, out
        return summaries(out), out

    def close(self):
        leftovers = self.c.close()
        if leftovers:
            print(f"warning: processes of jobs survived: {leftovers}", file=sys.stderr)


_PORTS = iter(range(29611, 29711))


def run_torchrun(hook, steps, timeout):
    port = next(_PORTS)  # a fresh one each run: the last run's may still be in TIME_WAIT
    rank = AUTO_POWERSGD_RANK if hook == "powersgd4" else POWERSGD_RANK
    args = ["--batch-size", "32", "--threads", "1", "--hook", "powersgd" if hook == "powersgd4" else hook,
            "--powersgd-rank", str(rank), "--powersgd-start-step", str(POWERSGD_START)]
    if steps:
        args += ["--max-steps", str(steps), "--no-eval"]
    with tempfile.TemporaryDirectory(prefix="torchrun-shaped-") as log_dir:
        procs = []
        for i, ns in enumerate(NS):
            cmd = ["ip", "netns", "exec", ns, PY, "-m", "torch.distributed.run",
                   "--redirects", "2", "--tee", "1", "--log_dir", os.path.join(log_dir, str(i)),
                   "--nnodes", "2", "--node_rank", str(i), "--nproc_per_node", "1",
                   "--master_addr", ns_addr(0), "--master_port", str(port),
                   os.path.join(ROOT, "bench/torch_ddp.py"), *args]
            env = dict(os.environ, PYTHONUNBUFFERED="1", GLOO_SOCKET_IFNAME=NS_IF[i],
                       OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True, env=env, start_new_session=True))
        out = ""
        deadline = time.time() + timeout
        for p in procs:
            try:
                out += p.communicate(timeout=max(1, deadline - time.time()))[0]
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                out += p.communicate()[0]
        per_rank = ""
        for path in sorted(glob.glob(os.path.join(log_dir, "*", "*", "attempt_*", "*",
                                                  "stdout.log"))):
            with open(path, errors="replace") as f:
                per_rank += f.read() + "\n"
    s = summaries(per_rank)
    if len(s) != 2:
        s = summaries(out)
    if len(s) != 2:
        print(f"torchrun {hook}: failed\n{out[-2000:]}", file=sys.stderr)
        return None, out
    return s, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="1gbit,10gbit",
                    help="tbf rates, comma-separated ('unshaped': no qdisc)")
    ap.add_argument("--steps", type=int, default=0,
                    help="optimiser steps; 0: one epoch, then test accuracy (a shorter run "
                         "measures throughput only)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--options", default="none,bf16,fp16,powersgd,auto")
    ap.add_argument("--torch", default="none,fp16,powersgd,powersgd4",
                    help="torchrun hooks to run (powersgd4: PowerSGD at the rank auto picks)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("ddp_shaped_link: needs root (network namespaces, tc)")
    options = a.options.split(",")
    hooks = a.torch.split(",")
    timeout = 3600 if a.steps == 0 else 120 + a.steps
    results = {}  # (rate, who) -> [summary sums]
    with Links() as links:
        cluster = ConvoyCluster()
        try:
            for rate in a.rates.split(","):
                links.shape(rate)
                mbit = measure_throughput()
                print(f"link {rate}: one TCP stream {mbit:.0f} Mbit/s", flush=True)
                results[(rate, "link")] = mbit
                for rep in range(a.repeats):
                    runs = [("convoy", o) for o in options] + [("torchrun", h) for h in hooks]
                    if rep % 2:
                        runs.reverse()  # alternate the order
                    for kind, what in runs:
                        if kind == "convoy":
                            s, _ = cluster.run(what, a.steps, timeout)
                        else:
                            s, _ = run_torchrun(what, a.steps, timeout)
                        key = (rate, f"{kind} {what}")
                        if s is None:
                            results.setdefault(key, [])
                            continue
                        rec = {"samples_per_s": sum(x["samples_per_s"] for x in s),
                               "accuracy": s[0].get("test_accuracy", -1),
                               "chose": s[0].get("compression", ""),
                               "hidden": statistics.mean(x.get("comm_hidden", -1) for x in s)}
                        results.setdefault(key, []).append(rec)
                        print(f"  {rate} run {rep + 1}: {kind:8s} {what:9s} "
                              f"{rec['samples_per_s']:7.0f} samples/s, accuracy "
                              + (f"{rec['accuracy'] * 100:.2f}%" if rec["accuracy"] >= 0
                                 else "not measured")
                              + (f" (chose {rec['chose']})" if what == "auto" else "")
                              + (f", {rec['hidden'] * 100:.0f}% of communication hidden"
                                 if kind == "convoy" and rec["hidden"] >= 0 else ""),
                              flush=True)
        finally:
            cluster.close()

    def med(rate, who, key):
        runs = results.get((rate, who), [])
        return statistics.median(r[key] for r in runs) if runs else None

    steps = "one epoch" if a.steps == 0 else f"{a.steps} steps"
    print(f"\n2 ranks x batch 32, Fashion-MNIST CNN, {steps}, median of {a.repeats}")
    for rate in a.rates.split(","):
        print(f"\n{rate} (one TCP stream: {results[(rate, 'link')]:.0f} Mbit/s)")
        print(f"  {'':22s}{'samples/s':>10s}{'accuracy':>10s}{'vs torchrun':>13s}"
              f"{'vs same hook':>14s}{'hidden':>8s}")
        base = med(rate, "torchrun none", "samples_per_s")
        for who in [f"convoy {o}" for o in options] + [f"torchrun {h}" for h in hooks]:
            v = med(rate, who, "samples_per_s")
            if v is None:
                print(f"  {who:22s}{'failed':>10s}")
                continue
            acc = med(rate, who, "accuracy")
            line = f"  {who:22s}{v:10.0f}" + (f"{acc * 100:9.2f}%" if acc >= 0 else f"{'-':>10s}")
            line += f"{v / base:13.2f}" if base else f"{'-':>13s}"
            if who.startswith("convoy"):
                option = who.split()[1]
                if option == "auto":
                    chose = [r["chose"] for r in results[(rate, who)]]
                    hook = AUTO_SAME_HOOK.get(max(set(chose), key=chose.count), "none")
                else:
                    hook = SAME_HOOK[option]
                same = med(rate, "torchrun " + hook, "samples_per_s")
                line += f"{v / same:14.2f}" if same else f"{'-':>14s}"
                hidden = med(rate, who, "hidden")
                line += f"{hidden * 100:7.0f}%" if hidden >= 0 else f"{'-':>8s}"
                if option == "auto":
                    line += f"  (chose {', '.join(sorted(set(chose)))}; vs torchrun {hook})"
            print(line)


if __name__ == "__main__":
    main()

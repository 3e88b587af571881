#!/usr/bin/python3
"""bench/scale_py_storm.py: N workers arriving at once from an asyncio Python gRPC client.

Each simulated worker has a channel of its own (its own subchannel, so its own TCP
connection), opens WorkerService.Connect, sends Register and waits for the RegisterAck; at
most --in-flight registrations are under way at once. The channels keep gRPC's default
client settings except GRPC_ARG_MIN_RECONNECT_BACKOFF_MS (--min-backoff-ms, 100 by default),
which gRPC 1.51 also takes as the connect timeout (FACTS.md): a server that is slow to accept
and finish the HTTP/2 handshake under a burst fails such clients with `UNAVAILABLE: failed to
connect to all addresses; ... tcp handshaker shutdown`. A failed attempt is retried at once on
a new channel and counted.

Used by bench/scale.py (--py-storm) beside the C++ simulator; alone:

  bench/scale_py_storm.py --coordinator 127.0.0.1:7070 --workers 3000 [--json]

Prints one JSON object: registered, seconds until the last RegisterAck, failed attempts and
the first few distinct errors. Needs python3-grpcio and Debian's protoc with
grpc_python_plugin (the stubs are generated into a temporary directory).
"""
import argparse
import asyncio
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "proto")


def load_stubs(tmp):
    """Generates the Python stubs of convoy/v1/worker.proto into `tmp` and imports them."""
    protos = [os.path.join("convoy", "v1", p) for p in ("common.proto", "worker.proto")]
    subprocess.run(["protoc", f"-I{PROTO_DIR}", f"--python_out={tmp}", f"--grpc_out={tmp}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", *protos],
                   check=True)
    sys.path.insert(0, tmp)
    from convoy.v1 import worker_pb2, worker_pb2_grpc  # noqa: E402
    return worker_pb2, worker_pb2_grpc


async def storm(args, pb, pb_grpc):
    import grpc
    options = [("grpc.min_reconnect_backoff_ms", args.min_backoff_ms),
               ("grpc.use_local_subchannel_pool", 1)]
    sem = asyncio.Semaphore(args.in_flight)
    failures = collections.Counter()
    registered = 0
    last_ack = 0.0
    held = []  # (channel, call) of the registered workers, open until the process exits
    t0 = time.time()

    async def one(i):
        nonlocal registered, last_ack
        name = f"{args.prefix}{i:05d}"
        while time.time() - t0 < args.timeout:
            async with sem:
                channel = grpc.aio.insecure_channel(args.coordinator, options=options)
                stub = pb_grpc.WorkerServiceStub(channel)
                call = None
                try:
                    call = stub.Connect()
                    msg = pb.WorkerMessage()
                    r = msg.register
                    r.name, r.address, r.hostname = name, "127.0.0.1", "storm"
                    r.cores, r.slots, r.version = 1, 1, "storm"

                    async def register():
                        await call.write(msg)
                        return await call.read()
                    reply = await asyncio.wait_for(register(), args.ack_timeout)
                    if reply is grpc.aio.EOF or not reply.HasField("register_ack"):
                        raise RuntimeError("no RegisterAck")
                    registered += 1
                    last_ack = time.time()
                    held.append((channel, call))
                    return
                except Exception as e:  # one failed attempt; tried again on a new channel
                    text = getattr(e, "details", lambda: None)() or str(e) or type(e).__name__
                    failures[text.split("\n")[0][:160]] += 1
                    if call is not None:
                        call.cancel()
                    await channel.close(grace=0)

    async def progress():
        while True:
            await asyncio.sleep(1)
            print(f"{time.time() - t0:6.1f} s: {registered} registered, "
                  f"{sum(failures.values())} failed attempts", file=sys.stderr, flush=True)
    ticker = asyncio.ensure_future(progress())
    results = await asyncio.gather(*(one(i) for i in range(args.workers)),
                                   return_exceptions=True)
    ticker.cancel()
    for r in results:
        if isinstance(r, BaseException):
            print("storm:", repr(r), file=sys.stderr)
            break
    out = {"workers": args.workers, "registered": registered,
           "registered_s": round(last_ack - t0, 2) if registered else None,
           "failed_attempts": sum(failures.values()),
           "errors": dict(failures.most_common(5))}
    if args.hold_s > 0:
        await asyncio.sleep(args.hold_s)
    # Not closed one by one: closing 10,000 grpc.aio channels took minutes (the storm's own
    # figures were long known by then). They stay referenced until main() leaves with
    # os._exit, and the kernel closes every connection at once.
    return out, held


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--coordinator", required=True, help="HOST:PORT of a --insecure coordinator")
    p.add_argument("--workers", type=int, default=3000)
    p.add_argument("--in-flight", type=int, default=200)
    p.add_argument("--min-backoff-ms", type=int, default=100)
    p.add_argument("--ack-timeout", type=float, default=30)
    p.add_argument("--timeout", type=float, default=120, help="give up after this many seconds")
    p.add_argument("--hold-s", type=float, default=0, help="keep the streams open this long")
    p.add_argument("--prefix", default="py-w")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="convoy-pystubs-")
    try:
        pb, pb_grpc = load_stubs(tmp)
        # The registered workers' channels stay open (referenced) until the exit below.
        out, _open_channels = asyncio.new_event_loop().run_until_complete(
            storm(args, pb, pb_grpc))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out), flush=True)
    # Not asyncio.run: its shutdown (cancelling what is left) can hang in grpc.aio's own
    # threads once thousands of channels existed; the kernel closes their connections.
    sys.stderr.flush()
    os._exit(0 if out["registered"] == args.workers else 1)


if __name__ == "__main__":
    sys.exit(main())

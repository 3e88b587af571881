"""The reference: PyTorch's own DDP (Debian's python3-torch) on the same model, data,
sharding, optimiser and thread settings as convoy-trainer. Run it under torchrun. Prints the
same `summary {...}` line as convoy-trainer."""

import argparse
import gzip
import json
import os
import resource
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


def process_age():
    with open("/proc/self/stat") as f:
        start = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return up - start / os.sysconf("SC_CLK_TCK")


def load(data_dir, prefix, limit=0):
    with gzip.open(f"{data_dir}/{prefix}-images-idx3-ubyte.gz") as f:
        img = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(f"{data_dir}/{prefix}-labels-idx1-ubyte.gz") as f:
        lab = np.frombuffer(f.read(), np.uint8, offset=8)
    if limit:
        img, lab = img[:limit], lab[:limit]
    x = (torch.from_numpy(img.copy()).float() / 255.0 - MEAN) / STD
    return x, torch.from_numpy(lab.astype(np.int64))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(3136, 512)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def serialized(hook):
    """The hook with each bucket's collectives issued only after the previous bucket's are done.

    powerSGD_hook issues its second and third all-reduce from the first one's callback, on a
    Gloo thread, while backward issues the next bucket's first all-reduce on the autograd
    thread: the two ranks can issue them in different orders, and Gloo 1.13 then aborts
    (`pair.cc op.preamble.length <= op.nbytes`) or resets the connection. Waiting for the
    previous bucket keeps one order on every rank, as Convoy's trainer does (one thread issues
    every compressed collective, bucket after bucket); the first bucket still overlaps the rest
    of backward."""
    previous = [None]

    def ordered(state, bucket):
        if bucket.index() > 0 and previous[0] is not None:
            previous[0].wait()
        fut = hook(state, bucket)
        previous[0] = None if bucket.is_last() else fut
        return fut

    return ordered


def main():
    age0 = process_age()
    t_main = time.monotonic()
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--no-eval", action="store_true")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cuda: the rank's GPU (LOCAL_RANK), NCCL, and DDP at any world size "
                        "(bench/gpu_vs_torchrun)")
    p.add_argument("--amp", default="off", choices=["off", "bf16"],
                   help="bf16: torch.autocast of forward and loss on the GPU")
    p.add_argument("--hook", default="none", choices=["none", "fp16", "bf16", "powersgd"],
                   help="a DDP communication hook (bench/ddp_shaped_link): fp16_compress_hook, "
                        "bf16_compress_hook, or PowerSGDState + powerSGD_hook")
    p.add_argument("--powersgd-rank", type=int, default=2)
    p.add_argument("--powersgd-start-step", type=int, default=10)
    p.add_argument("--print-steps", action="store_true", help="a STEP line per step (restart bench)")
    p.add_argument("--print-startup", action="store_true",
                   help="a startup {...} line of phase times at the first step (start_latency)")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="rank 0 saves model, optimiser and position every N steps (restart bench)")
    p.add_argument("--checkpoint-dir", default="",
                   help="where; a restarted attempt resumes from the checkpoint there")
    a = p.parse_args()
    startup = {"start_unix": time.time() - age0 - (time.monotonic() - t_main),
               "main_unix": time.time() - (time.monotonic() - t_main)}
    if a.threads:
        torch.set_num_threads(a.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    cuda = a.device == "cuda"
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else None
    if cuda:
        torch.cuda.set_device(dev)
    to = (lambda t: t.to(dev)) if cuda else (lambda t: t)
    x, y = load(a.data_dir, "train")
    tx, ty = load(a.data_dir, "t10k")
    startup["data_unix"] = time.time()
    torch.manual_seed(a.seed)
    model = Cnn()
    if cuda:
        model = model.to(dev)
    startup["model_unix"] = time.time()
    ddp = world > 1 or cuda
    if ddp:
        dist.init_process_group("nccl" if cuda else "gloo")
        model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if cuda else None)
        if a.hook != "none":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
            if a.hook == "powersgd":
                # PyTorch wants start_powerSGD_iter > 1 with error feedback and warm start.
                state = powerSGD_hook.PowerSGDState(
                    process_group=None, matrix_approximation_rank=a.powersgd_rank,
                    start_powerSGD_iter=max(2, a.powersgd_start_step), random_seed=a.seed)
                model.register_comm_hook(state, serialized(powerSGD_hook.powerSGD_hook))
            else:
                model.register_comm_hook(None, default_hooks.fp16_compress_hook if a.hook == "fp16"
                                         else default_hooks.bf16_compress_hook)
    startup["rendezvous_unix"] = time.time()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    sampler = torch.utils.data.distributed.DistributedSampler(
        torch.utils.data.TensorDataset(x, y), num_replicas=world, rank=rank, shuffle=True,
        seed=a.seed)
    steps_per_epoch = len(sampler) // a.batch_size
    total = steps_per_epoch * a.epochs
    if a.max_steps:
        total = min(total, a.max_steps)
    step, samples, first_step_s, acc = 0, 0, 0.0, -1.0
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    ckpt = os.path.join(a.checkpoint_dir, "ckpt.pt") if a.checkpoint_dir else ""
    if ckpt and os.path.exists(ckpt):
        # What a torchrun user writes: every rank loads rank 0's last checkpoint (one machine
        # here, so one file system) and continues from its step.
        state = torch.load(ckpt)
        (model.module if ddp else model).load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
        print(f"RESUMED {restart} {rank} {step}", flush=True)
    t_train = time.monotonic()
    for epoch in range(a.epochs):
        if step >= total:
            break
        sampler.set_epoch(epoch)
        idx = torch.tensor(list(iter(sampler)))
        for b in range(steps_per_epoch):
            if step >= total:
                break
            if epoch * steps_per_epoch + b < step:
                continue  # done before the restart
            sel = idx[b * a.batch_size:(b + 1) * a.batch_size]
            if a.amp == "bf16":
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = F.cross_entropy(model(to(x[sel])), to(y[sel]))
            else:
                loss = F.cross_entropy(model(to(x[sel])), to(y[sel]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            samples += a.batch_size
            if ckpt and rank == 0 and step % a.checkpoint_every == 0:
                os.makedirs(a.checkpoint_dir, exist_ok=True)
                torch.save({"model": (model.module if ddp else model).state_dict(),
                            "optimizer": opt.state_dict(), "step": step}, ckpt + ".tmp")
                os.replace(ckpt + ".tmp", ckpt)
            if a.print_steps:
                print(f"STEP {restart} {rank} {step}", flush=True)
            if first_step_s == 0.0:
                first_step_s = age0 + time.monotonic() - t_main
                if a.print_startup:
                    startup["first_step_unix"] = time.time()
                    print("startup " + json.dumps({"rank": rank, "attempt": restart, **startup}),
                          flush=True)
        if not a.no_eval:
            with torch.no_grad():
                mine = torch.arange(rank, len(ty), world)
                correct = sum(int((model(to(tx[mine[i:i + 200]])).argmax(1).cpu()
                                   == ty[mine[i:i + 200]]).sum())
                              for i in range(0, len(mine), 200))
                t = to(torch.tensor([float(correct), float(len(mine))]))
                if ddp:
                    dist.all_reduce(t)
                t = t.cpu()
                acc = float(t[0] / t[1])
                print(f"rank {rank} epoch {epoch}: test accuracy {acc * 100:.2f}% at "
                      f"{age0 + time.monotonic() - t_main:.1f} s", flush=True)
    if cuda:
        torch.cuda.synchronize()
    secs = time.monotonic() - t_train
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("summary " + json.dumps({
        "rank": rank, "world": world, "steps": step, "samples_per_s": samples / secs,
        "first_step_s": first_step_s, "peak_rss_mb": peak, "test_accuracy": acc,
        "train_seconds": secs}), flush=True)
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A torchrun-style DDP script: a small CNN on Fashion-MNIST, CPU, gloo.

Runs unchanged under `torchrun --nproc-per-node 2 train_ddp.py` and under Convoy, which
sets the same variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Needs
only Debian's python3-torch and python3-numpy; reads the IDX files of
dataset-fashion-mnist (/usr/share/datasets/fashion-mnist) directly.
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

try:  # optional: progress in `convoy status`; the script runs without it
    from convoy_metrics import report
except ImportError:
    def report(**_):
        pass


def read_idx(path):
    """An IDX file (gzip): images as float32 N x 1 x 28 x 28 in [0, 1], labels as int64."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    ndim = magic & 0xFF
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)
    if ndim == 3:
        return torch.from_numpy(arr.astype(np.float32) / 255.0).unsqueeze(1)
    return torch.from_numpy(arr.astype(np.int64))


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"))
    return TensorDataset((x - 0.2860) / 0.3530, y)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


@record
def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: no limit)")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from env
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

    train = load(args.data_dir, "train")
    test = load(args.data_dir, "test")
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    step, start = 0, time.time()
    done = False
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            step += 1
            report(step=step, epoch=epoch, loss=loss.item(), samples=step * len(x) * world)
            if rank == 0 and step % 50 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
            if args.max_steps and step >= args.max_steps:
                done = True
                break
        if done:
            break

    # Every rank evaluates its shard of the test set; the counts are summed.
    model.eval()
    idx = list(range(rank, len(test), world))
    xs, ys = test.tensors[0][idx], test.tensors[1][idx]
    with torch.no_grad():
        correct = (model(xs).argmax(1) == ys).sum()
    counts = torch.tensor([int(correct), len(idx)], dtype=torch.int64)
    dist.all_reduce(counts)
    acc = counts[0].item() / counts[1].item()
    report(step=step, test_accuracy=acc)
    if rank == 0:
        print(f"test accuracy {acc:.4f} after {step} steps "
              f"({time.time() - start:.1f} s, world size {world})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

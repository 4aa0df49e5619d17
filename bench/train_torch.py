#!/usr/bin/env python3
"""train_torch.py — the PyTorch side of bench_train.sh: the models of `nabla train` (MLP 784-256-128-10,
CNN with two conv3x3+ReLU+maxpool2 blocks then 3136-128-10) trained on Fashion-MNIST exactly as nabla
does by default (standardized pixels, batch 128, Adam lr 2e-3 with a per-step cosine schedule, fresh
shuffle each epoch, loss.item() and accuracy each step), with T threads (OMP_NUM_THREADS and
torch.set_num_threads).

    /usr/bin/python3 bench/train_torch.py --model mlp --threads 2 --epochs 1        # Debian's 1.13
    /work/venv/bin/python3 bench/train_torch.py --model mlp --wait-policy default    # PyPI's 2.x

Prints one line per model: "<model> train_seconds=<s> test_accuracy=<a> samples_per_second=<r>",
where train_seconds covers the training steps only (as nabla's JSON line), not data loading or the
test pass.
"""
import argparse
import gzip
import math
import os
import time

import numpy as np

torch = nn = F = None  # imported in main() once OMP_NUM_THREADS is set

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST training pixels, as tools/data.c


def idx(path):
    opener = gzip.open if os.path.exists(path + ".gz") else open
    with opener(path + ".gz" if opener is gzip.open else path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def split(data, prefix):
    x = torch.from_numpy(idx(os.path.join(data, prefix + "-images-idx3-ubyte")).astype(np.float32) / 255.0)
    y = torch.from_numpy(idx(os.path.join(data, prefix + "-labels-idx1-ubyte")).astype(np.int64))
    return ((x - MEAN) / STD).reshape(len(x), 784), y


def model(name):
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def shaped(name, x):
    return x if name == "mlp" else x.reshape(-1, 1, 28, 28)


def run(args, name, train, test):
    torch.manual_seed(args.seed)
    net = model(name)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    x, y = train
    n = min(args.limit, len(x)) if args.limit else len(x)
    steps = (n + args.batch_size - 1) // args.batch_size
    total, step, seconds = args.epochs * steps, 0, 0.0
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        perm = torch.randperm(n)
        loss_sum, correct = 0.0, 0
        for s in range(0, n, args.batch_size):
            idx_ = perm[s:s + args.batch_size]
            xb, yb = shaped(name, x[idx_]), y[idx_]
            logits = net(xb)
            loss = F.cross_entropy(logits, yb)
            for g in opt.param_groups:
                g["lr"] = args.lr * (1 + math.cos(math.pi * step / total)) / 2
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            loss_sum += loss.item() * len(yb)
            correct += (logits.argmax(1) == yb).sum().item()
        seconds += time.perf_counter() - t0
    with torch.no_grad():
        tx, ty = test
        acc = sum((net(shaped(name, tx[i:i + 1000])).argmax(1) == ty[i:i + 1000]).sum().item()
                  for i in range(0, len(tx), 1000)) / len(tx)
    print("%s train_seconds=%.3f test_accuracy=%.4f samples_per_second=%.1f" %
          (name, seconds, acc, n * args.epochs / seconds), flush=True)


def common_args(p):
    """The options every training peer takes (train_torch.py, train_jax.py), as bench_train.sh passes them."""
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="both", choices=["mlp", "cnn", "both"])
    common_args(p)
    p.add_argument("--wait-policy", default="passive", choices=["passive", "default"],
                   help="OMP_WAIT_POLICY=PASSIVE (fastest for PyTorch 1.13) or libgomp's default spinning "
                        "(fastest for PyTorch 2.x); bench_train.sh picks each version's best")
    args = p.parse_args()
    # libgomp reads these when torch loads.  Spinning OpenMP workers collapse on a busy 2-CPU machine
    # (measured: 20x slower with PyTorch 1.13), so each version gets its best setting.
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    if args.wait_policy == "passive":
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    global torch, nn, F
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    train, test = split(args.data, "train"), split(args.data, "t10k")
    for name in (["mlp", "cnn"] if args.model == "both" else [args.model]):
        run(args, name, train, test)


if __name__ == "__main__":
    main()

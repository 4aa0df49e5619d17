#!/usr/bin/env python3
"""train_jax.py — the JAX side of bench_train.sh: the models of `nabla train` (MLP 784-256-128-10; CNN
with two conv3x3+ReLU+maxpool2 blocks then 3136-128-10; ReLU, PyTorch's default Linear and Conv2d
init) trained on Fashion-MNIST as train_torch.py does (standardized pixels,
Adam lr 2e-3 with a per-step cosine schedule, fresh shuffle each epoch, the loss and accuracy fetched
each step), with the whole train step (forward, backward, Adam) one jax.jit function.  The first
steps compile it; they run before the timed epoch, which is timed after compilation.

    /work/venv/bin/python3 bench/train_jax.py --model cnn --threads 2 --batch-size 128

Prints "<model> train_seconds=<s> test_accuracy=<a> samples_per_second=<r>" like train_torch.py.
"""
import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_torch import common_args  # noqa: E402  (numpy only; torch is imported inside its functions)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    common_args(p)
    args = p.parse_args()
    # XLA's CPU client sizes its thread pool by the CPUs it may run on: bench_train.sh pins it to
    # --threads CPUs with taskset (there is no thread-count flag).
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import numpy as np
    from train_torch import MEAN, STD, idx

    def split(prefix):
        x = idx(os.path.join(args.data, prefix + "-images-idx3-ubyte")).astype(np.float32) / 255.0
        y = idx(os.path.join(args.data, prefix + "-labels-idx1-ubyte")).astype(np.int32)
        return ((x - MEAN) / STD).reshape(len(x), 784), y

    (x, y), (tx, ty) = split("train"), split("t10k")
    rng = np.random.default_rng(args.seed)

    def uniform(fan_in, shape):  # torch's default Linear / Conv2d init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        b = 1 / math.sqrt(fan_in)
        return jnp.asarray(rng.uniform(-b, b, shape), jnp.float32)

    if args.model == "mlp":
        sizes = [784, 256, 128, 10]
        convs = []
    else:
        # NHWC images and HWIO kernels, XLA's CPU layout: the same model written NCHW / OIHW as torch
        # (measured here) took 1.4x as long.  Flattening NHWC only permutes fc1's input features.
        sizes = [64 * 7 * 7, 128, 10]
        convs = [(uniform(c * 9, (3, 3, c, o)), uniform(c * 9, (o,))) for c, o in ((1, 32), (32, 64))]
    params = convs + [(uniform(fan_in, (fan_in, fan_out)), uniform(fan_in, (fan_out,)))
                      for fan_in, fan_out in zip(sizes[:-1], sizes[1:])]
    nconv = len(convs)

    def forward(ps, xb):
        if nconv:
            xb = xb.reshape(-1, 28, 28, 1)
        for i, (w, b) in enumerate(ps):
            if i < nconv:
                xb = jax.lax.conv_general_dilated(xb, w, (1, 1), ((1, 1), (1, 1)),
                                                  dimension_numbers=("NHWC", "HWIO", "NHWC"))
                xb = jax.nn.relu(xb + b)
                xb = jax.lax.reduce_window(xb, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
                if i + 1 == nconv:
                    xb = xb.reshape(xb.shape[0], -1)
                continue
            xb = xb @ w + b
            if i + 1 < len(ps):
                xb = jax.nn.relu(xb)
        return xb

    def loss_fn(ps, xb, yb):
        logits = forward(ps, xb)
        loss = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), yb[:, None], axis=1))
        return loss, logits

    @jax.jit
    def train_step(ps, m, v, t, lr, xb, yb):
        (loss, logits), g = jax.value_and_grad(loss_fn, has_aux=True)(ps, xb, yb)
        b1, b2, eps = 0.9, 0.999, 1e-8
        m = jax.tree_util.tree_map(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, g)
        v = jax.tree_util.tree_map(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, g)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        ps = jax.tree_util.tree_map(lambda p_, m_, v_: p_ - lr * (m_ / c1) / (jnp.sqrt(v_ / c2) + eps), ps, m, v)
        return ps, m, v, loss, jnp.sum(jnp.argmax(logits, 1) == yb)

    n = min(args.limit, len(x)) if args.limit else len(x)
    bs = args.batch_size
    steps = (n + bs - 1) // bs
    total = args.epochs * steps
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    # compile for the full batch and for the last, shorter one before timing
    for b in sorted({bs, n - (steps - 1) * bs}):
        jax.block_until_ready(train_step(params, m, v, 1.0, 0.0, x[:b], y[:b]))
    step, seconds = 0, 0.0
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        perm = rng.permutation(n)
        loss_sum, correct = 0.0, 0
        for s in range(0, n, bs):
            i = perm[s:s + bs]
            lr = args.lr * (1 + math.cos(math.pi * step / total)) / 2
            step += 1
            params, m, v, loss, hits = train_step(params, m, v, float(step), lr, x[i], y[i])
            loss_sum += float(loss) * len(i)
            correct += int(hits)
        seconds += time.perf_counter() - t0
    acc = float(np.mean(np.concatenate([np.argmax(np.asarray(forward(params, tx[i:i + 1000])), 1)
                                        for i in range(0, len(tx), 1000)]) == ty))
    print("%s train_seconds=%.3f test_accuracy=%.4f samples_per_second=%.1f" %
          (args.model, seconds, acc, n * args.epochs / seconds), flush=True)


if __name__ == "__main__":
    main()

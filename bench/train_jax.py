#!/usr/bin/env python3
"""train_jax.py — the JAX side of bench_train.sh: the MLP of `nabla train` (784-256-128-10, ReLU,
PyTorch's default Linear init) trained on Fashion-MNIST as train_torch.py does (standardized pixels,
Adam lr 2e-3 with a per-step cosine schedule, fresh shuffle each epoch, the loss and accuracy fetched
each step), with the whole train step (forward, backward, Adam) one jax.jit function.  The first
steps compile it; they run before the timed epoch, which is timed after compilation.

    /work/venv/bin/python3 bench/train_jax.py --threads 2 --batch-size 128

Prints "mlp train_seconds=<s> test_accuracy=<a> samples_per_second=<r>" like train_torch.py.
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
    sizes = [784, 256, 128, 10]
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):  # torch.nn.Linear's U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        b = 1 / math.sqrt(fan_in)
        params.append((jnp.asarray(rng.uniform(-b, b, (fan_in, fan_out)), jnp.float32),
                       jnp.asarray(rng.uniform(-b, b, (fan_out,)), jnp.float32)))

    def forward(ps, xb):
        for i, (w, b) in enumerate(ps):
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
    acc = float(np.mean(np.argmax(np.asarray(forward(params, tx)), 1) == ty))
    print("mlp train_seconds=%.3f test_accuracy=%.4f samples_per_second=%.1f" %
          (seconds, acc, n * args.epochs / seconds), flush=True)


if __name__ == "__main__":
    main()

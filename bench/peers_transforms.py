#!/usr/bin/env python3
"""peers_transforms.py — JAX's side of bench_transforms.c: the same MLP loss (784-256-128-10, ReLU,
softmax cross-entropy on one-hot labels, f32, batch 128) under jax.jit(jax.vmap(jax.grad)),
jax.jit(jax.grad) and jax.jit(jax.vmap) (and 128 calls of the jitted per-example loss), timed as
nabla's: median of NB_BENCH_REPS (7) calls after 2 warm-up calls (compilation happens there;
first_ms reports it), results blocked on.  Prints "case=<name> impl=<impl> ms=<median> ...".
The caller pins the process (taskset); XLA has no thread-count flag, the pinning limits it.
"""
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

IN, H1, H2, OUT, BATCH = 784, 256, 128, 10, 128


def timed(fn, reps):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    jax.block_until_ready(fn())
    warm = time.perf_counter() - t0
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), max(ts), warm


def loss(p, x, y):
    h = jax.nn.relu(x @ p[0] + p[1])
    h = jax.nn.relu(h @ p[2] + p[3])
    z = h @ p[4] + p[5]
    return -jnp.sum(y * jax.nn.log_softmax(z, axis=-1), axis=-1)


def main():
    reps = int(os.environ.get("NB_BENCH_REPS", "7"))
    rng = np.random.default_rng(7)
    shapes = [(IN, H1), (H1,), (H1, H2), (H2,), (H2, OUT), (OUT,)]
    p = [jnp.asarray(rng.standard_normal(s).astype(np.float32) * 0.05) for s in shapes]
    x = jnp.asarray(rng.random((BATCH, IN), dtype=np.float32))
    y = jnp.asarray(np.eye(OUT, dtype=np.float32)[rng.integers(0, OUT, BATCH)])

    def report(case, impl, r):
        med, lo, hi, warm = r
        print(f"case={case} impl={impl} ms={med * 1e3:.3f} min={lo * 1e3:.3f} max={hi * 1e3:.3f} "
              f"first_ms={warm * 1e3:.1f}", flush=True)

    per_example = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    report("per_example", "jax-jit", timed(lambda: per_example(p, x, y), reps))
    grad = jax.jit(jax.grad(lambda q, a, b: jnp.mean(loss(q, a, b))))
    report("grad", "jax-jit", timed(lambda: grad(p, x, y), reps))
    vmapped = jax.jit(jax.vmap(loss, in_axes=(None, 0, 0)))
    report("vmap_f", "jax-jit", timed(lambda: vmapped(p, x, y), reps))
    one = jax.jit(loss)
    rows = [(x[i], y[i]) for i in range(BATCH)]
    report("vmap_f", "jax-loop", timed(lambda: [one(p, a, b) for a, b in rows][-1], reps))


if __name__ == "__main__":
    main()

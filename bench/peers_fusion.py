#!/usr/bin/env python3
"""peers_fusion.py — the peers of bench_fusion.c: the same four workloads with JAX jit,
torch.compile and PyTorch eager (and NumPy for gelu's formula), timed the same way: median of
NB_BENCH_REPS (5) calls after 2 warm-up calls (compilation happens in the warm-up; its time is
printed separately).  Prints lines "case=<name> impl=<peer> ms=<median> min=.. max=..", which
bench_fusion.sh puts beside nabla's.  Threads: the caller pins the process (taskset) and sets
NB_BENCH_THREADS (torch.set_num_threads; XLA has no flag, the pinning limits it).

  python3 peers_fusion.py [--only gelu|softmax|layer_norm|col_sum] [--peers jax,torch-compile,torch-eager]
"""
import argparse
import os
import statistics
import time


def timed(fn, reps):
    t0 = time.perf_counter()
    fn()
    fn()
    warm = time.perf_counter() - t0
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), max(ts), warm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--peers", default="jax,torch-compile,torch-eager")
    a = ap.parse_args()
    reps = int(os.environ.get("NB_BENCH_REPS", "5"))
    threads = int(os.environ.get("NB_BENCH_THREADS", "2"))
    n = int(os.environ.get("NB_BENCH_N", str(64 << 20)))
    rows = int(os.environ.get("NB_BENCH_ROWS", "8192"))
    cols = int(os.environ.get("NB_BENCH_COLS", "4096"))
    peers = a.peers.split(",")
    cases = [c for c in ("gelu", "softmax", "layer_norm", "col_sum") if not a.only or c == a.only]

    def report(case, impl, r):
        med, lo, hi, warm = r
        print(f"case={case} impl={impl} ms={med * 1e3:.3f} min={lo * 1e3:.3f} max={hi * 1e3:.3f} "
              f"first_ms={warm * 1e3:.1f}", flush=True)

    if "jax" in peers:
        try:
            import jax
            import jax.numpy as jnp
        except ImportError:
            jax = None
        if jax is not None:
            fns = {
                "gelu": lambda x: jax.nn.gelu(x * 1.5 + 0.5, approximate=False),
                "softmax": lambda x: jax.nn.softmax(x, axis=-1),
                "layer_norm": lambda x: (x - x.mean(-1, keepdims=True))
                * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5),
                "col_sum": lambda x: jnp.sum(jax.nn.relu(x) * 0.5, axis=0),
            }
            for c in cases:
                shape = (n,) if c == "gelu" else (rows, cols)
                x = jax.random.normal(jax.random.PRNGKey(1), shape, dtype=jnp.float32)
                f = jax.jit(fns[c])
                report(c, "jax-jit", timed(lambda: f(x).block_until_ready(), reps))
    if "torch-compile" in peers or "torch-eager" in peers:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            torch.set_num_threads(threads)
            fns = {
                "gelu": lambda x: torch.nn.functional.gelu(x * 1.5 + 0.5),
                "softmax": lambda x: torch.softmax(x, -1),
                "layer_norm": lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],), eps=1e-5),
                "col_sum": lambda x: (torch.relu(x) * 0.5).sum(0),
            }
            for c in cases:
                shape = (n,) if c == "gelu" else (rows, cols)
                g = torch.Generator().manual_seed(1)
                x = torch.randn(shape, generator=g)
                with torch.no_grad():
                    if "torch-eager" in peers:
                        report(c, "torch-eager", timed(lambda: fns[c](x), reps))
                    if "torch-compile" in peers:
                        f = torch.compile(fns[c])
                        report(c, "torch-compile", timed(lambda: f(x), reps))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""peers.py — the peer side of bench_elementwise / bench_reduce / bench_overhead:
the same cases timed in PyTorch (torch.set_num_threads(T)) and NumPy, with the
same methodology (median of REPS timed calls after warm-up, fresh outputs).

    /usr/bin/python3 bench/peers.py            # T = NB_BENCH_THREADS (2), REPS = NB_BENCH_REPS (9)
    NB_BENCH_CLOCK=cpu /usr/bin/python3 bench/peers.py   # thread CPU time (overhead table only)

Prints markdown tables (milliseconds, or nanoseconds per op for overhead).
"""
import os
import statistics
import time

import numpy as np
import torch

THREADS = int(os.environ.get("NB_BENCH_THREADS", "2"))
REPS = int(os.environ.get("NB_BENCH_REPS", "9"))
# NB_BENCH_CLOCK=cpu: this thread's CPU time (as bench_util.h), else wall time
CLOCK = time.thread_time if os.environ.get("NB_BENCH_CLOCK") == "cpu" else time.perf_counter


def timed(fn, reps=REPS, warmup=2, inner=1):
    """Median, min, max seconds per call of fn over reps samples of `inner` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        t0 = CLOCK()
        for _ in range(inner):
            fn()
        samples.append((CLOCK() - t0) / inner)
    return statistics.median(samples), min(samples), max(samples)


def row(name, stat, scale, unit_bytes=None):
    med, lo, hi = stat
    bw = "" if unit_bytes is None else "%.1f" % (unit_bytes / med / 1e9)
    print("| %s | %.2f | %.2f..%.2f | %s |" % (name, med * scale, lo * scale, hi * scale, bw))


def with_threads(t, fn):
    """Run fn with torch limited to t threads (torch's pool wakes slowly on a loaded VM)."""
    torch.set_num_threads(t)
    try:
        fn()
    finally:
        torch.set_num_threads(THREADS)


def elementwise(n=16 << 20):
    nbytes = n * 4
    print("\n## elementwise, %d f32, torch %s threads=%d, numpy %s (1 thread)" %
          (n, torch.__version__, THREADS, np.__version__))
    print("| case | ms (median) | min..max | GB/s |\n|---|---|---|---|")
    ta, tb = torch.rand(n), torch.rand(n)
    na, nb = ta.numpy().copy(), tb.numpy().copy()
    dst = np.empty_like(na)
    row("numpy copyto (memcpy, 1 thread)", timed(lambda: np.copyto(dst, na)), 1e3, 2 * nbytes)
    out = torch.empty(n)
    cases = [
        ("torch.add(a, b)", lambda: torch.add(ta, tb), 3),
        ("torch.add(a, b, out=c) (no first touch)", lambda: torch.add(ta, tb, out=out), 3),
        ("torch.mul(a, b)", lambda: torch.mul(ta, tb), 3),
        ("torch.add(a, 1.0)", lambda: torch.add(ta, 1.0), 2),
        ("torch.exp(a)", lambda: torch.exp(ta), 2),
        ("torch.exp(a, out=c) (no first touch)", lambda: torch.exp(ta, out=out), 2),
        ("torch.tanh(a)", lambda: torch.tanh(ta), 2),
        ("torch.sigmoid(a)", lambda: torch.sigmoid(ta), 2),
        ("np.add(a, b)", lambda: np.add(na, nb), 3),
        ("np.add(a, b, out=c) (no first touch)", lambda: np.add(na, nb, out=dst), 3),
        ("np.multiply(a, b)", lambda: np.multiply(na, nb), 3),
        ("np.exp(a)", lambda: np.exp(na), 2),
        ("np.tanh(a)", lambda: np.tanh(na), 2),
    ]
    for name, fn, nio in cases:
        row(name, timed(fn), 1e3, nio * nbytes)
    with_threads(1, lambda: [row(name + " [torch 1 thread]", timed(fn), 1e3, nio * nbytes)
                             for name, fn, nio in cases if name.startswith("torch") and "out=" in name])


def reductions(r=4096, c=4096):
    nbytes = r * c * 4
    print("\n## sum of f32 [%d, %d], GB/s = bytes read / time" % (r, c))
    print("| case | ms (median) | min..max | GB/s read |\n|---|---|---|---|")
    tx = torch.randn(r, c)
    nx = tx.numpy().copy()
    cases = [
        ("torch sum all", lambda: tx.sum()),
        ("torch sum axis -1", lambda: tx.sum(-1)),
        ("torch sum axis 0", lambda: tx.sum(0)),
        ("torch.amax axis -1", lambda: torch.amax(tx, -1)),
        ("numpy sum all", lambda: nx.sum()),
        ("numpy sum axis -1", lambda: nx.sum(-1)),
        ("numpy sum axis 0", lambda: nx.sum(0)),
        ("numpy max axis -1", lambda: nx.max(-1)),
    ]
    for name, fn in cases:
        row(name, timed(fn), 1e3, nbytes)
    with_threads(1, lambda: [row(name + " [torch 1 thread]", timed(fn), 1e3, nbytes)
                             for name, fn in cases if name.startswith("torch")])


def overhead(n=4):
    print("\n## per-op overhead on %d f32 elements (inputs created once; ns per call)" % n)
    print("| case | ns per op (median) | min..max | |\n|---|---|---|---|")
    ta, tb = torch.rand(n), torch.rand(n)
    na, nb = ta.numpy().copy(), tb.numpy().copy()
    inner = 100000
    cases = [
        ("torch.add(a, b)", lambda: torch.add(ta, tb)),
        ("torch.add(a, 1.0)", lambda: torch.add(ta, 1.0)),
        ("torch.mul(a, b)", lambda: torch.mul(ta, tb)),
        ("torch.exp(a)", lambda: torch.exp(ta)),
        ("torch.sum(a)", lambda: torch.sum(ta)),
        ("np.add(a, b)", lambda: np.add(na, nb)),
        ("np.exp(a)", lambda: np.exp(na)),
        ("np.sum(a)", lambda: np.sum(na)),
        ("python loop of `pass` (interpreter floor)", lambda: None),
    ]
    for name, fn in cases:
        row(name, timed(fn, warmup=inner // 10, inner=inner), 1e9)


if __name__ == "__main__":
    torch.set_num_threads(THREADS)
    print("# peers.py: torch %s (threads %d), numpy %s, median of %d reps" %
          (torch.__version__, torch.get_num_threads(), np.__version__, REPS))
    overhead()
    elementwise()
    reductions()

#!/usr/bin/env python3
"""peers_attention.py — PyTorch's side of bench_attention.c: torch.nn.functional.scaled_dot_product_attention
(f32, CPU) at B=4, H=8, D=64, L = NB_BENCH_L (1024), unmasked and causal, forward (no_grad) and
forward+backward (NB_BENCH_FWD_ONLY=1: forward only); median of NB_BENCH_REPS (5) after one warm-up call.  Prints lines
"case=<name> impl=torch-sdpa ms=<median> ... rss_mb=<peak resident MiB so far>".  Threads:
torch.set_num_threads(NB_BENCH_THREADS); the caller pins the process (taskset).
"""
import os
import resource
import statistics
import time

import torch
import torch.nn.functional as F


def main():
    reps = int(os.environ.get("NB_BENCH_REPS", "5"))
    torch.set_num_threads(int(os.environ.get("NB_BENCH_THREADS", "2")))
    length = int(os.environ.get("NB_BENCH_L", "1024"))
    passes = (False,) if os.environ.get("NB_BENCH_FWD_ONLY", "0") == "1" else (False, True)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(4, 8, length, 64, generator=g, requires_grad=True) for _ in range(3))
    for causal in (False, True):
        for bwd in passes:
            def call():
                if bwd:
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()
                    for t in (q, k, v):
                        t.grad = None
                else:
                    with torch.no_grad():
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            call()
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                call()
                ts.append(time.perf_counter() - t0)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            name = f"{'causal' if causal else 'none'}_{'fwd_bwd' if bwd else 'fwd'}_L{length}"
            print(f"case={name} impl=torch-sdpa ms={statistics.median(ts) * 1e3:.3f} min={min(ts) * 1e3:.3f} "
                  f"max={max(ts) * 1e3:.3f} rss_mb={rss:.0f}", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# bench_fusion.sh — fused compiled graphs against their peers in one run: bench_fusion (nabla fused,
# nabla eager, the memcpy of the same bytes) and peers_fusion.py (JAX jit, torch.compile, PyTorch
# eager), every one pinned to the same T CPUs, in interleaved rounds; prints per-implementation
# medians over the rounds and the ratios the issue's goals are written in (nabla fused / memcpy
# bandwidth, nabla fused time / JAX jit and / torch.compile time), then nabla's compile latencies.
#   bash bench/bench_fusion.sh [BUILD_DIR]     (default build/release; bench_fusion built when missing)
# Environment: NB_BENCH_THREADS (2), NB_BENCH_ROUNDS (3), NB_BENCH_REPS (5, per process),
# NB_BENCH_N / NB_BENCH_ROWS / NB_BENCH_COLS (sizes, see bench_fusion.c), NB_BENCH_VENV
# (/work/venv/bin/python3: a venv with jax and torch 2.x; a missing one leaves its peers out).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
bench_setup bench_fusion 3 "${1:-}"
# the kernels compiled at run time go to a fresh cache: round 1 builds them, later rounds load them
export NB_JIT_CACHE="$tmp/jit"
bench_rounds bench_fusion peers_fusion.py
awk "$bench_awk_lib"'
  /^case=/ {
    c = field("case"); i = field("impl"); fm = field("first_ms")
    if (fm != "") first[c "," i] = fm
    n[c "," i]++; v[c "," i "," n[c "," i]] = field("ms"); cases[c] = 1; impls[i] = 1
  }
  /^memory / { mem = substr($0, 8) }
  /^adam: / { adam = substr($0, 7) }
  /^compile / {
    c = field("case"); f[c] = field("first_ms"); h[c] = field("cached_ms")
    if (!(c in cold)) cold[c] = field("first_run_ms"); else warm[c] = field("first_run_ms")
  }
  function ms(x) { return x == "" ? "—" : sprintf("%.2f", x) }
  END {
    print "| workload | memcpy ms | nabla fused ms | nabla fused-into ms | nabla eager ms | JAX jit ms | torch.compile ms | PyTorch eager ms | fused / memcpy bandwidth | fused-into / memcpy bandwidth | fused / JAX | fused / torch.compile |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|"
    split("gelu softmax layer_norm col_sum", order, " ")
    for (o = 1; o <= 4; o++) {
      c = order[o]; if (!(c in cases)) continue
      mc = med(c ",memcpy"); fu = med(c ",nabla-fused"); fi = med(c ",nabla-fused-into"); ea = med(c ",nabla-eager")
      jx = med(c ",jax-jit"); tc = med(c ",torch-compile"); te = med(c ",torch-eager")
      # col_sum reads its input and writes one row: half the bytes of the copy
      half = c == "col_sum" ? 0.5 : 1
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c, ms(mc), ms(fu), ms(fi), ms(ea), ms(jx), ms(tc),
             ms(te), ratio(half * mc, fu), ratio(half * mc, fi), ratio(fu, jx), ratio(fu, tc)
    }
    print ""
    if ("adam" in cases)
      printf "adam update of a [256, 784] f32 parameter (13 ops, in place): fused %s ms, eager op by op %s ms (%s)\n",
             ms(med("adam,nabla-fused")), ms(med("adam,nabla-eager")), adam
    if (mem != "") print "memory plan, " mem
    for (c in f) printf "compile latency %s: nabla first %.3f ms, cached %.3f ms, first run %s ms (round 1: builds the run-time compiled kernels), %s ms (later rounds: loads them from the cache); first call (compile + run) JAX jit %s ms, torch.compile %s ms\n", c, f[c], h[c], cold[c], (c in warm) ? warm[c] : "—", (c ",jax-jit") in first ? first[c ",jax-jit"] : "—", (c ",torch-compile") in first ? first[c ",torch-compile"] : "—"
  }' "$tmp/lines"

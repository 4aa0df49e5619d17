#!/usr/bin/env bash
# bench_attention.sh — nabla's scaled_dot_product_attention against PyTorch's SDPA (f32, CPU) in one run:
# bench_attention (nabla) and peers_attention.py (torch 2.x) pinned to the same T CPUs in interleaved
# rounds; prints per case the medians of the rounds, nabla / torch, and each process's peak resident
# memory (the process's high-water mark after that case: nabla forms the [L, L] scores, torch's
# flash kernel does not).
#   bash bench/bench_attention.sh [BUILD_DIR]   (default build/release; bench_attention built when missing)
# Environment: NB_BENCH_THREADS (2), NB_BENCH_ROUNDS (3), NB_BENCH_REPS (5), NB_BENCH_L (1024),
# NB_BENCH_FWD_ONLY (1: forward cases only),
# NB_BENCH_VENV (/work/venv/bin/python3, with torch 2.x).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
bench_setup bench_attention 3 "${1:-}"
bench_rounds bench_attention peers_attention.py
awk "$bench_awk_lib"'
  /^case=/ { c = field("case"); key = c "," field("impl"); n[key]++; v[key "," n[key]] = field("ms") + 0
             rss[key] = field("rss_mb"); if (!(c in seen)) { seen[c] = 1; order[++nc] = c } }
  END {
    print "| case | nabla ms | torch SDPA ms | nabla / torch | nabla peak MiB | torch peak MiB |"
    print "|---|---|---|---|---|---|"
    for (i = 1; i <= nc; i++) {
      c = order[i]; a = med(c ",nabla"); b = med(c ",torch-sdpa")
      printf "| %s | %s | %s | %s | %s | %s |\n", c, a == "" ? "—" : sprintf("%.1f", a), b == "" ? "—" : sprintf("%.1f", b),
             ratio(a, b), (c ",nabla") in rss ? rss[c ",nabla"] : "—", (c ",torch-sdpa") in rss ? rss[c ",torch-sdpa"] : "—"
    }
  }' "$tmp/lines"

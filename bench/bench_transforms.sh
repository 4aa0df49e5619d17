#!/usr/bin/env bash
# bench_transforms.sh — the function transforms against JAX in one run: bench_transforms (nabla) and
# peers_transforms.py (JAX jit) pinned to the same T CPUs in interleaved rounds; prints the median of
# the rounds' medians per case and implementation and the ratios the issue asks for: per-example
# gradients jit(vmap(grad)) / JAX's, jit(grad) / JAX's, and vmap(f) against B separate calls of f.
#   bash bench/bench_transforms.sh [BUILD_DIR]   (default build/release; bench_transforms built when missing)
# Environment: NB_BENCH_THREADS (2), NB_BENCH_ROUNDS (5), NB_BENCH_REPS (7, per process),
# NB_BENCH_VENV (/work/venv/bin/python3: a venv with jax; a missing one leaves JAX out).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
bench_setup bench_transforms 5 "${1:-}"
bench_rounds bench_transforms peers_transforms.py
awk "$bench_awk_lib"'
  /^case=/ { key = field("case") "," field("impl"); n[key]++; v[key "," n[key]] = field("ms") + 0 }
  /^compile / { first[field("case")] = field("first_ms"); cached[field("case")] = field("cached_ms") }
  function ms(x) { return x == "" ? "—" : sprintf("%.3f", x) }
  END {
    print "| workload | nabla ms | JAX jit ms | nabla / JAX |"
    print "|---|---|---|---|"
    split("per_example grad vmap_f", order, " ")
    label["per_example"] = "per-example gradients, jit(vmap(grad)), batch 128"
    label["grad"] = "jit(grad) of the batch-mean loss, batch 128"
    label["vmap_f"] = "jit(vmap(loss)) over 128 examples"
    for (o = 1; o <= 3; o++) {
      c = order[o]; a = med(c ",nabla"); b = med(c ",jax-jit")
      printf "| %s | %s | %s | %s |\n", label[c], ms(a), ms(b), ratio(a, b)
    }
    a = med("vmap_f,nabla"); l = med("vmap_f,nabla-loop"); jl = med("vmap_f,jax-loop")
    printf "\nvmap(f) on 128 examples / 128 calls of f: nabla %s (%s ms vs %s ms), JAX %s\n", ratio(a, l), ms(a), ms(l), ratio(med("vmap_f,jax-jit"), jl)
    for (c in first) printf "compile latency %s: first %.3f ms, cached %.4f ms\n", c, first[c], cached[c]
  }' "$tmp/lines"

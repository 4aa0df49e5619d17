#!/usr/bin/env bash
# perf_spin.sh — the worker pool's spin share in an MLP training profile: `perf record -g` over
# bench_faults (MLP, batch 128, 2 threads, STEPS steps), the last 70 % of the samples (the training
# window: data loading and warm-up come first), and the share of all samples that the pool's worker
# threads spend waiting (their own loop — worker/wait_for_job inlined — the clock reads of the spin,
# and kernel time: sched_yield and futex) rather than running ranges.  Also each thread's share of
# the samples (a balanced pool puts ~half of them on the worker).
#   bash bench/perf_spin.sh [BUILD_DIR] [STEPS]     (default build/release, 600 steps)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
steps=${2:-600}
data=$(mktemp)
trap 'rm -f "$data"' EXIT
NB_BENCH_THREADS=2 NB_BENCH_MODELS=mlp NB_BENCH_BATCHES=128 \
  perf record -q -g -o "$data" "$build/bench/bench_faults" "$steps" >/dev/null 2>&1
perf report -i "$data" --stdio --no-children --sort pid,sym -g none --time 30%-100% 2>/dev/null |
  grep -E '^ +[0-9.]+%' |
  awk '{ pct = $1; sub("%", "", pct); pid = $2; sym = $NF; tot[pid] += pct; all += pct
         if (sym ~ /^(worker|wait_for_job|now_us|clock_gettime|__vdso_clock_gettime|__sched_yield|syscall)$/ || $3 == "[k]") wait[pid] += pct }
       END { main = ""; for (p in tot) if (main == "" || p + 0 < main + 0) main = p  # the first thread: the caller
             for (p in tot) { printf "thread %s: %.1f %% of samples%s\n", p, 100 * tot[p] / all, p == main ? " (caller)" : ""
                              if (p != main) spin += wait[p] }
             printf "worker spin share: %.1f %% of all samples (goal <= 5 %%)\n", 100 * spin / all }'

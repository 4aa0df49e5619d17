#!/usr/bin/env bash
# bench_dist.sh — data-parallel training on this machine: bench_dist under `mpirun -np 2` (nabla's
# all-reduce and nb_ddp_finish against MPI_Allreduce, and the overlap with backward), then one
# epoch of `nabla train` (MLP, batch 128, Adam) as 2 ranks x 1 thread and as 1 rank x 2 threads,
# interleaved over NB_BENCH_ROUNDS rounds (5); prints the medians of the training seconds.
#   bash bench/bench_dist.sh [BUILD_DIR]   (default build/release; built when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
rounds=${NB_BENCH_ROUNDS:-5}
if [ ! -x "$build/bench/bench_dist" ] || [ ! -x "$build/tools/nabla" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DNB_BUILD_BENCH=ON -DNB_BUILD_TOOLS=ON >/dev/null
  cmake --build "$build" -j "$(nproc)" --target bench_dist nabla_cli >/dev/null
fi
mpi=(mpirun --oversubscribe --allow-run-as-root)
grep -m1 "model name" /proc/cpuinfo | sed 's/.*: /# cpu: /'
"${mpi[@]}" -np 2 "$build/bench/bench_dist" 21 1 128
echo
secs() { grep -o '"train_seconds":[0-9.]*' | cut -d: -f2; }
a=() b=()
for r in $(seq "$rounds"); do
  echo "round $r/$rounds" >&2
  a+=("$("${mpi[@]}" -np 2 "$build/tools/nabla" train --epochs 1 --threads 1 --json 2>/dev/null | secs)")
  b+=("$("$build/tools/nabla" train --epochs 1 --threads 2 --json 2>/dev/null | secs)")
done
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ma=$(med "${a[@]}") mb=$(med "${b[@]}")
echo "| MLP epoch (batch 128, Adam) | seconds, median of $rounds |"
echo "|---|---|"
echo "| 2 ranks x 1 thread (mpirun -np 2 nabla train --threads 1) | $ma |"
echo "| 1 rank x 2 threads (nabla train --threads 2) | $mb |"
echo "| ratio | $(awk -v x="$ma" -v y="$mb" 'BEGIN {printf "%.2f", x / y}') |"

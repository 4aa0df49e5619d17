#!/bin/sh
# test_cli_dist.sh — `nabla train` under mpirun (2 ranks), eager and --compiled: one JSON line
# (rank 0 reports), the same checkpoint bits from run to run (the reduction order is fixed), and a
# test accuracy near one process's on the same global batches.
# Usage: test_cli_dist.sh NABLA MPIEXEC WORKDIR
set -eu
nabla=$1 mpiexec=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir"
args="train --epochs 1 --limit 3000 --batch-size 100 --threads 1 --seed 5 --json"
run() { "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$nabla" $args "$@"; }
acc() { grep -o '"test_accuracy":[0-9.]*' "$1" | cut -d: -f2; }
"$nabla" $args > "$dir/alone" 2>/dev/null
for mode in eager compiled; do
  flag=; [ "$mode" = compiled ] && flag=--compiled
  run $flag --save "$dir/$mode.1.safetensors" > "$dir/$mode.out" 2> "$dir/$mode.err"
  run $flag --save "$dir/$mode.2.safetensors" > /dev/null 2>&1
  [ "$(grep -c '"test_accuracy"' "$dir/$mode.out")" = 1 ] ||
    { echo "$mode: want one JSON line from rank 0:"; cat "$dir/$mode.out" "$dir/$mode.err"; exit 1; }
  cmp "$dir/$mode.1.safetensors" "$dir/$mode.2.safetensors" || { echo "$mode: two runs, two checkpoints"; exit 1; }
  # one epoch of 3000 rows: within 2 points of one process
  awk -v a="$(acc "$dir/$mode.out")" -v b="$(acc "$dir/alone")" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.02) }' ||
    { echo "$mode: test accuracy $(acc "$dir/$mode.out"), one process $(acc "$dir/alone")"; exit 1; }
done
echo "ok: eager and --compiled: one report, identical checkpoints, one process's accuracy"

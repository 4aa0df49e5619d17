#!/bin/sh
# test_cli_dist.sh — `nabla train` under mpirun (2 ranks): one JSON line (rank 0 reports), one
# checkpoint, the same bits from run to run (the reduction order is fixed), and --compiled refused
# with its reason.  Usage: test_cli_dist.sh NABLA MPIEXEC WORKDIR
set -eu
nabla=$1 mpiexec=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir"
run() { "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$nabla" train --epochs 1 --limit 3000 --batch-size 100 \
          --threads 1 --seed 5 --json "$@"; }
run --save "$dir/a.safetensors" > "$dir/out1" 2> "$dir/err1"
run --save "$dir/b.safetensors" > "$dir/out2" 2> "$dir/err2"
[ "$(grep -c '"test_accuracy"' "$dir/out1")" = 1 ] || { echo "want one JSON line from rank 0:"; cat "$dir/out1"; exit 1; }
cmp "$dir/a.safetensors" "$dir/b.safetensors" || { echo "two runs gave different checkpoints"; exit 1; }
if run --compiled > "$dir/out3" 2> "$dir/err3"; then echo "--compiled under mpirun should be refused"; exit 1; fi
grep -q "cannot run data-parallel yet" "$dir/err3" || { echo "no reason given:"; cat "$dir/err3"; exit 1; }
echo "ok: one report, identical checkpoints, --compiled refused"

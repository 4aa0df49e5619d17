#!/usr/bin/env bash
# bench_train.sh — one epoch of Fashion-MNIST training, nabla against PyTorch, same models, batch size,
# optimizer, schedule and thread count; prints seconds and the nabla/PyTorch time ratio per model
# (goals: MLP <= 0.5, CNN <= 1.0).
#   bench/bench_train.sh [BUILD_DIR]     (default build/release; built here when missing)
# Environment: NB_BENCH_THREADS (2), NB_BENCH_EPOCHS (1), NB_BENCH_MODELS ("mlp cnn").
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
threads=${NB_BENCH_THREADS:-2}
epochs=${NB_BENCH_EPOCHS:-1}
models=${NB_BENCH_MODELS:-mlp cnn}
if [ ! -x "$build/tools/nabla" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DNB_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" -j "$(nproc)" --target nabla_cli >/dev/null
fi
field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
printf '| model | nabla s | nabla acc | PyTorch s | PyTorch acc | ratio |\n|---|---|---|---|---|---|\n'
for m in $models; do
  json=$("$build/tools/nabla" train --model "$m" --epochs "$epochs" --threads "$threads" --json 2>/dev/null | tail -1)
  ns=$(echo "$json" | field train_seconds)
  na=$(echo "$json" | field test_accuracy)
  line=$(/usr/bin/python3 bench/train_torch.py --model "$m" --epochs "$epochs" --threads "$threads")
  ts=$(echo "$line" | sed -n 's/.*train_seconds=\([0-9.]*\).*/\1/p')
  ta=$(echo "$line" | sed -n 's/.*test_accuracy=\([0-9.]*\).*/\1/p')
  printf '| %s | %.2f | %.4f | %.2f | %.4f | %.2f |\n' "$m" "$ns" "$na" "$ts" "$ta" "$(awk -v a="$ns" -v b="$ts" 'BEGIN { print a / b }')"
done

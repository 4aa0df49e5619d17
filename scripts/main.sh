#!/usr/bin/env bash
# main.sh — the README's main command: install what is missing (Debian packages), build nabla,
# and train the Fashion-MNIST MLP from the command line. Extra arguments go to `nabla train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build main
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DNB_BUILD_TESTS=OFF -DNB_BUILD_TOOLS=ON >/dev/null
cmake --build build/release -j "$(nproc)" --target nabla_cli
mkdir -p out
exec build/release/tools/nabla train --model mlp --epochs 5 --metrics out/metrics.csv --save out/mlp.safetensors "$@"

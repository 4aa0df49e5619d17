#!/usr/bin/env bash
# bench_train.sh — one epoch of Fashion-MNIST training: nabla (eager, and --compiled: the whole step
# traced, fused and planned) against PyTorch 1.13 (Debian), PyTorch
# 2.x and JAX jit (PyPI venv), same models, batch size, optimizer (Adam, cosine schedule) and thread
# count.  Method (bench/RESULTS.md, "Training method"): every peer pinned to the same T CPUs
# (taskset -c 0..T-1), each at its best thread-wait policy (PyTorch 1.13: OMP_WAIT_POLICY=PASSIVE and
# OPENBLAS_CORETYPE=SkylakeX; PyTorch 2.x: libgomp's default), JAX's jit'd step timed after it is
# compiled; rounds interleave the peers (round r runs every peer once before round r+1 starts) and
# the table shows per-peer medians over the rounds, plus nabla's ratio to the faster PyTorch and to
# JAX.  Then bench_faults (when built) prints minor page faults per step after warm-up.
#   bash bench/bench_train.sh [BUILD_DIR]     (default build/release; built here when missing)
# Environment: NB_BENCH_THREADS (2), NB_BENCH_ROUNDS (3), NB_BENCH_MODELS ("mlp cnn"),
# NB_BENCH_BATCHES ("64 128"), NB_BENCH_LIMIT (train on the first N samples, 0 = all: 0),
# NB_BENCH_TORCH1 (/usr/bin/python3), NB_BENCH_VENV (/work/venv/bin/python3); a peer whose Python
# lacks torch / jax shows "—".
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
threads=${NB_BENCH_THREADS:-2}
rounds=${NB_BENCH_ROUNDS:-3}
models=${NB_BENCH_MODELS:-mlp cnn}
batches=${NB_BENCH_BATCHES:-64 128}
limit=${NB_BENCH_LIMIT:-0}
py1=${NB_BENCH_TORCH1:-/usr/bin/python3}
py2=${NB_BENCH_VENV:-/work/venv/bin/python3}
if [ ! -x "$build/tools/nabla" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DNB_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" -j "$(nproc)" --target nabla_cli bench_faults >/dev/null
fi
pin=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge "$threads" ]; then pin=(taskset -c "0-$((threads - 1))"); fi
has() { "$1" -c "import $2" >/dev/null 2>&1; }
# OpenBLAS's SkylakeX kernels only where the CPU has AVX-512 (elsewhere they die with SIGILL)
skx=""
grep -qw avx512f /proc/cpuinfo && skx=1
peers=(nabla nablac)
has "$py1" torch && [ "$("$py1" -c 'import torch; print(torch.__version__[0])')" = 1 ] && peers+=(torch1)
has "$py2" torch && peers+=(torch2)
has "$py2" jax && peers+=(jax)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# --compiled builds its fused kernels with the C compiler on first use: into a fresh cache, filled by
# a short warm-up run per model and batch, so no timed epoch pays for the builds
export NB_JIT_CACHE="$tmp/jit"

# seconds of one run of peer $1 on model $2, batch $3 ("" when the peer has no such model)
run_one() {
  local args=(--epochs 1 --threads "$threads" --batch-size "$3" --limit "$limit")
  case $1 in
    nabla) "${pin[@]}" "$build/tools/nabla" train --model "$2" "${args[@]}" --json 2>/dev/null | tail -1 |
             sed -n 's/.*"train_seconds":\([0-9.]*\).*/\1/p' ;;
    nablac) "${pin[@]}" "$build/tools/nabla" train --compiled --model "$2" "${args[@]}" --json 2>/dev/null | tail -1 |
             sed -n 's/.*"train_seconds":\([0-9.]*\).*/\1/p' ;;
    torch1) env OMP_WAIT_POLICY=PASSIVE ${skx:+OPENBLAS_CORETYPE=SkylakeX} "${pin[@]}" "$py1" bench/train_torch.py \
             --model "$2" "${args[@]}" --wait-policy passive | sed -n 's/.*train_seconds=\([0-9.]*\).*/\1/p' ;;
    torch2) "${pin[@]}" "$py2" bench/train_torch.py --model "$2" "${args[@]}" --wait-policy default |
             sed -n 's/.*train_seconds=\([0-9.]*\).*/\1/p' ;;
    jax) "${pin[@]}" "$py2" bench/train_jax.py --model "$2" "${args[@]}" 2>/dev/null |
             sed -n 's/.*train_seconds=\([0-9.]*\).*/\1/p' || true ;;
  esac
}

for m in $models; do
  for b in $batches; do
    "$build/tools/nabla" train --compiled --model "$m" --epochs 1 --batch-size "$b" --limit 512 >/dev/null 2>&1 || true
  done
done
for r in $(seq "$rounds"); do
  for m in $models; do
    for b in $batches; do
      for p in "${peers[@]}"; do
        s=$(run_one "$p" "$m" "$b" || true)
        [ -n "$s" ] && echo "$s" >> "$tmp/$m-$b-$p"
        echo "round $r/$rounds: $m batch $b $p ${s:-—} s" >&2
      done
    done
  done
done

median() { [ -s "$1" ] && sort -g "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) CPUs online), $threads threads, pinned: ${pin[*]:-no}"
lim=""
[ "$limit" != 0 ] && lim=" (first $limit samples)"
echo "medians of $rounds interleaved rounds, seconds per training epoch$lim"
echo
echo "| model / batch | nabla | nabla --compiled | PyTorch 1.13 | PyTorch 2.x | JAX jit | nabla / faster PyTorch | nabla / JAX | compiled / eager | compiled / JAX |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for m in $models; do
  for b in $batches; do
    n=$(median "$tmp/$m-$b-nabla" || true)
    nc=$(median "$tmp/$m-$b-nablac" || true)
    t1=$(median "$tmp/$m-$b-torch1" || true)
    t2=$(median "$tmp/$m-$b-torch2" || true)
    j=$(median "$tmp/$m-$b-jax" || true)
    awk -v m="$m" -v b="$b" -v n="$n" -v nc="$nc" -v t1="$t1" -v t2="$t2" -v j="$j" '
      function f(x) { return x == "" ? "—" : sprintf("%.2f s", x) }
      function r(x, y) { return (x == "" || y == "") ? "—" : sprintf("%.2f", x / y) }
      BEGIN { t = t1 == "" ? t2 : (t2 == "" || t1 < t2 ? t1 : t2)
              printf "| %s / %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m, b, f(n), f(nc), f(t1), f(t2), f(j),
                     r(n, t), r(n, j), r(nc, n), r(nc, j) }'
  done
done
if [ -x "$build/bench/bench_faults" ]; then
  echo
  NB_BENCH_THREADS=$threads NB_BENCH_MODELS="$models" NB_BENCH_BATCHES="$batches" "${pin[@]}" "$build/bench/bench_faults" 100
fi

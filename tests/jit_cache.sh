#!/bin/sh
# jit_cache.sh — the run-time kernel compiler's cache and compiler checks, through test_fusion
# (which asserts, with NB_TEST_EXPECT_JIT, whether kernels are compiled, and that every result
# equals eager bit for bit):
#   1. a cold cache: kernels built;
#   2. every cached object truncated: rebuilt (dlopen of a truncated object would raise SIGBUS);
#   3. stdout closed: the compiler's version is still read (it keys the cache);
#   4. a program that is not the build's compiler as NB_CC: refused, kernels interpreted.
# Usage: jit_cache.sh TEST_FUSION SCRATCH_DIR
set -eu
bin=$1
dir=$2
rm -rf "$dir"
mkdir -p "$dir"
chmod 700 "$dir"
export NB_JIT_CACHE="$dir" NB_TEST_QUICK=1 NB_FUSION_PROGRAMS=60
# a crash inside dlopen under cmocka's signal handlers leaves the compiler's lock held: a hang
run() { timeout 300 "$bin"; }
NB_TEST_EXPECT_JIT=1 run > "$dir/cold.log" 2>&1 || { cat "$dir/cold.log"; exit 1; }
n=$(ls "$dir"/k-*.so | wc -l)
[ "$n" -gt 0 ] || { echo "jit_cache: no kernel was cached"; exit 1; }
for f in "$dir"/k-*.so; do truncate -s 4096 "$f"; done
NB_TEST_EXPECT_JIT=1 run > "$dir/truncated.log" 2>&1 || { cat "$dir/truncated.log"; exit 1; }
for f in "$dir"/k-*.so; do
  [ "$(wc -c < "$f")" -gt 4096 ] || { echo "jit_cache: $f was not rebuilt"; exit 1; }
done
NB_TEST_EXPECT_JIT=1 run 2> "$dir/closed.log" 1>&- || { cat "$dir/closed.log"; exit 1; }
NB_CC=true NB_TEST_EXPECT_JIT=0 run > "$dir/foreign.log" 2>&1 || { cat "$dir/foreign.log"; exit 1; }
echo "jit_cache: $n kernels built, rebuilt after truncation, compiler checks held"

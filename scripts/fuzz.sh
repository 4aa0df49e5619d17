#!/usr/bin/env bash
# fuzz.sh — fuzz the file readers: build the libFuzzer targets of tests/fuzz with clang in build/fuzz
# (library and targets under ASan + UBSan) and run each for SECONDS, starting from the committed seed
# corpus (tests/fuzz/corpus/*, never modified; new inputs go to build/fuzz/corpus). test.sh runs 60 s
# each; a longer hunt: `bash scripts/fuzz.sh 3600`. A crash input is left in build/fuzz/artifacts.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
bash scripts/deps.sh build fuzz
cmake -S . -B build/fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNB_FUZZ=ON \
  -DNB_BUILD_TESTS=OFF -DNB_BUILD_TOOLS=OFF -DNB_WERROR=OFF >/dev/null
cmake --build build/fuzz -j "$(nproc)" --target fuzz_safetensors fuzz_idx
mkdir -p build/fuzz/artifacts
for reader in safetensors idx; do
  mkdir -p "build/fuzz/corpus/$reader"
  log=build/fuzz/$reader.log
  dict=(); [ -f "tests/fuzz/$reader.dict" ] && dict=(-dict="tests/fuzz/$reader.dict")
  echo "fuzz.sh: fuzz_$reader for ${secs}s (log: $log)"
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "build/fuzz/tests/fuzz/fuzz_$reader" \
       -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="build/fuzz/artifacts/$reader-" "${dict[@]}" \
       "build/fuzz/corpus/$reader" "tests/fuzz/corpus/$reader" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz.sh: fuzz_$reader failed; the input is in build/fuzz/artifacts (add it to tests/fuzz/corpus/$reader once fixed)" >&2
    exit 1
  fi
  grep -E '^stat::number_of_executed_units|^Done' "$log" || tail -n 3 "$log"
done

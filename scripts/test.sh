#!/usr/bin/env bash
# test.sh — the README's test command: install what is missing, build with -Werror, run the whole
# suite, rebuild and run it again under AddressSanitizer + UndefinedBehaviorSanitizer, then fuzz the
# file readers for a minute each (scripts/fuzz.sh). A ctest run that finds no test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build test fuzz
jobs=$(nproc)
# Python's safetensors package checks that files nabla writes load there (PyPI, in a venv)
venv=build/pyvenv
[ -x "$venv/bin/python3" ] || python3 -m venv --system-site-packages "$venv"
"$venv/bin/python3" -c "import safetensors" 2>/dev/null || "$venv/bin/python3" -m pip install -q safetensors \
  || echo "test.sh: warning: could not install safetensors; the Python interop check will be skipped"
export PATH="$PWD/$venv/bin:$PATH"
# every option the suite depends on is set explicitly: main.sh shares build/release with tests off
suite=(-DNB_BUILD_TESTS=ON -DNB_BUILD_TOOLS=ON -DNB_WERROR=ON)
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DNB_SANITIZE=OFF "${suite[@]}" >/dev/null
cmake --build build/release -j "$jobs"
(cd build/release && ctest --no-tests=error --output-on-failure -j "$jobs")
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DNB_SANITIZE=ON "${suite[@]}" >/dev/null
cmake --build build/asan -j "$jobs"
(cd build/asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 NB_TEST_QUICK=1 \
   ctest --no-tests=error --output-on-failure -j "$jobs")
bash scripts/fuzz.sh 60

# common.sh — sourced by the bench_*.sh drivers that interleave a nabla bench with Python peers:
# `bench_setup TARGET DEFAULT_ROUNDS [BUILD_DIR]` builds TARGET in BUILD_DIR (default build/release)
# when missing and sets build, threads (NB_BENCH_THREADS, 2; exported), rounds (NB_BENCH_ROUNDS),
# py (NB_BENCH_VENV, /work/venv/bin/python3), pin (taskset to the first T CPUs when there are that
# many) and tmp (a scratch folder removed on exit).
bench_setup() {
  build=${3:-build/release}
  threads=${NB_BENCH_THREADS:-2}
  rounds=${NB_BENCH_ROUNDS:-$2}
  py=${NB_BENCH_VENV:-/work/venv/bin/python3}
  if [ ! -x "$build/bench/$1" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DNB_BUILD_BENCH=ON >/dev/null
    cmake --build "$build" -j "$(nproc)" --target "$1" >/dev/null
  fi
  pin=()
  if command -v taskset >/dev/null && [ "$(nproc)" -ge "$threads" ]; then pin=(taskset -c "0-$((threads - 1))"); fi
  export NB_BENCH_THREADS=$threads
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}

# One round: the nabla bench (args: the bench's name) then the peers script (bench/PEERS.py), pinned.
bench_round() {
  "${pin[@]}" "$build/bench/$1" >> "$tmp/lines"
  if [ -x "$py" ]; then "${pin[@]}" "$py" "bench/$2" 2>/dev/null >> "$tmp/lines" || true; fi
}

# awk functions the drivers prepend to their summaries: med(key), the median of the samples
# v[key "," 1 .. n[key]] ("" when none); ms(x) and ratio(x, y) format them ("—" for a missing one).
bench_awk_lib='
  function med(key,   m, a, j, k, t) {
    m = n[key]; if (!m) return ""
    for (j = 1; j <= m; j++) a[j] = v[key "," j] + 0
    for (j = 1; j <= m; j++) for (k = j + 1; k <= m; k++) if (a[k] < a[j]) { t = a[j]; a[j] = a[k]; a[k] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  function ratio(x, y) { return (x == "" || y == "") ? "—" : sprintf("%.2f", x / y) }
'

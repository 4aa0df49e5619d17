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

# The rounds: in each, the nabla bench (BENCH) then the peers script (bench/PEERS), pinned, their
# lines into $tmp/lines; then the CPU line and the method, as every driver's summary starts.
bench_rounds() {
  for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    "${pin[@]}" "$build/bench/$1" >> "$tmp/lines"
    if [ -x "$py" ]; then "${pin[@]}" "$py" "bench/$2" 2>/dev/null >> "$tmp/lines" || true; fi
  done
  grep -m1 '^# cpu' "$tmp/lines" || true
  echo "medians of $rounds rounds (each the median of NB_BENCH_REPS calls), $threads threads, pinned: ${pin[*]:-no}"
  echo
}

# awk functions the drivers prepend to their summaries: field(k), the value of "k=value" on the line;
# med(key), the median of the samples v[key "," 1 .. n[key]] ("" when none); ratio(x, y) formats x / y
# ("—" for a missing one).
bench_awk_lib='
  function field(k,   i, p) { for (i = 1; i <= NF; i++) { split($i, p, "="); if (p[1] == k) return p[2] } return "" }
  function med(key,   m, a, j, k, t) {
    m = n[key]; if (!m) return ""
    for (j = 1; j <= m; j++) a[j] = v[key "," j] + 0
    for (j = 1; j <= m; j++) for (k = j + 1; k <= m; k++) if (a[k] < a[j]) { t = a[j]; a[j] = a[k]; a[k] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  function ratio(x, y) { return (x == "" || y == "") ? "—" : sprintf("%.2f", x / y) }
'

#!/usr/bin/env bash
# deps.sh — install the Debian packages nabla needs, only when missing (run as root on Debian).
# Usage: scripts/deps.sh [build|test|main|fuzz|golden|bench]...
set -euo pipefail
want=(build-essential cmake pkg-config zlib1g-dev libjansson-dev libcairo2-dev fonts-dejavu-core)
for role in "$@"; do
  case "$role" in
    build) ;;
    # test_train trains on the real data set when it is installed (CI: always); test_dist runs
    # under Open MPI's mpirun
    test) want+=(libcmocka-dev valgrind python3 python3-venv python3-numpy dataset-fashion-mnist libopenmpi-dev openmpi-bin) ;;
    main) want+=(dataset-fashion-mnist) ;;
    # fuzz: clang; libFuzzer and the sanitizer runtimes are in libclang-rt-dev (only recommended by
    # clang); llvm gives llvm-symbolizer, without which clang's sanitizer reports have no source lines
    fuzz) want+=(clang libclang-rt-dev llvm) ;;
    golden) want+=(python3-torch python3-numpy) ;;
    bench) want+=(libopenblas-dev python3-torch python3-numpy) ;;
    *) echo "deps.sh: unknown role '$role'" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps.sh: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

#!/bin/sh
# install_test.sh — `cmake --install` a build into a scratch prefix, then build and run
# tests/install/example.c against it by each route a user has: the shared library via
# `pkg-config --cflags --libs nabla` (the README's command), a fully static program via
# `pkg-config --static` (which must list every private dependency; with MPI built in and no
# static MPI on the system, libnabla.a with the system's shared libraries), and CMake's find_package
# (nabla::nabla, nabla::nabla_static). Also: libnabla.so exports the public nb_ API only.
# Usage: install_test.sh CC BUILD_DIR LIBDIR SOURCE_DIR SCRATCH_DIR
set -eu
cc=$1 build=$2 libdir=$3 src=$4 work=$5
rm -rf "$work"
mkdir -p "$work/run"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
ex=$src/tests/install/example.c
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"

# shared: the README's command; the program needs libnabla.so at run time
"$cc" -o "$work/shared" "$ex" $(pkg-config --cflags --libs nabla)
readelf -d "$work/shared" | grep -q 'NEEDED.*libnabla\.so' || { echo "shared route did not link libnabla.so" >&2; exit 1; }
LD_LIBRARY_PATH="$prefix/$libdir" "$work/shared" "$work/run"
leaked=$(nm -D --defined-only "$prefix/$libdir/libnabla.so" | awk '$2 ~ /[TDBR]/ && $3 !~ /^nb_[a-z0-9]/' | head -n 5)
[ -z "$leaked" ] || { echo "libnabla.so exports non-API symbols: $leaked" >&2; exit 1; }

# static: every library comes from pkg-config --static (nothing shared in the program) — unless
# nabla was built with MPI and the system has no static MPI (Debian ships libmpi.so only): then
# libnabla.a is linked in and the system's libraries stay shared
if grep -q ompi-c "$PKG_CONFIG_PATH/nabla.pc" && [ ! -e "$(dirname "$(pkg-config --variable=libdir ompi-c)")/lib/libmpi.a" ] &&
   [ ! -e "$(pkg-config --variable=libdir ompi-c)/libmpi.a" ]; then
  "$cc" -o "$work/static" "$ex" $(pkg-config --cflags nabla) "$prefix/$libdir/libnabla.a" \
    $(pkg-config --static --libs nabla | sed 's/-lnabla\b//')
  ! readelf -d "$work/static" | grep -q 'NEEDED.*libnabla' || { echo "static route linked libnabla.so" >&2; exit 1; }
else
  "$cc" -static -o "$work/static" "$ex" $(pkg-config --static --cflags --libs nabla)
fi
"$work/static" "$work/run"

# CMake package: both targets
cmake -S "$src/tests/install" -B "$work/cmake" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/example_shared" "$work/run"
"$work/cmake/example_static" "$work/run"
echo "install_test: shared, static and CMake routes ok"

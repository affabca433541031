#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs, for a GPU machine that has a driver but not this
# project's libraries: a portable (-DSPS_CPU=portable) CUDA build of sps and test_cuda and
# every shared library they load except the C library's own, in one .tar.gz (gzip: every
# machine can unpack it). The golden cases are not in it: they travel with the tree
# (tests/golden), where gpu-check.sh reads them.
#
#   scripts/gpu-bundle.sh [--from BUILD_DIR] [OUT.tar.gz]   (default build/gpu-bundle.tar.gz)
#
# --from packs an existing build's sps and test_cuda instead of building (the tests pack the
# release build so, to check that a bundle fits a lent machine's 64 MiB and starts).
#
# Then, on the GPU machine: scripts/gpu-check.sh --bundle OUT.tar.gz
# gpu-check.sh runs each binary with the bundle's lib/ on its library path: a RUNPATH would
# reach only the binaries' own dependencies, not theirs (libmpi's, say).
set -euo pipefail
cd "$(dirname "$0")/.."
build=""
if [ "${1:-}" = --from ]; then
  [ -x "${2:-}/sps" ] && [ -x "$2/test_cuda" ] ||
    { echo "gpu-bundle.sh: --from ${2:-}: expected a build folder holding sps and test_cuda" >&2; exit 2; }
  build=$2
  shift 2
fi
out=$(realpath -m "${1:-build/gpu-bundle.tar.gz}")
if [ -z "$build" ]; then
  build=build/gpu-portable
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPS_CUDA=ON -DSPS_CPU=portable \
    >/dev/null
  ninja -C $build sps test_cuda
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
cp $build/sps $build/test_cuda "$stage/"
# The C library, its loader and its parts come from the machine the bundle runs on, and so
# do the CUDA toolkit's libraries (cuBLASLt alone is about 500 MB): gpu-check.sh adds the
# toolkit's lib64 to the library path.
ldd $build/sps $build/test_cuda | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*)\.so|/libcublas' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
# The MPI the bundled libmpi is (mpirun's first line): gpu-check.sh runs two processes only
# under the same mpirun, since another one cannot start this libmpi's MPI_Init.
if command -v mpirun >/dev/null; then
  version=$(mpirun --version 2>&1)
  echo "${version%%$'\n'*}" >"$stage/mpi-version"
fi
tar -C "$stage" -c . | gzip -9 >"$out"
echo "$out: $(du -h "$out" | cut -f1) ($(ls "$stage/lib" | wc -l) libraries)"

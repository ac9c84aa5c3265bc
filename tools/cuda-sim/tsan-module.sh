#!/bin/sh
# Builds pipenet's CUDA module again with its kernels instrumented by ThreadSanitizer,
# from a build configured against this stand-in (scripts/test_cuda_sim.sh's
# build/cuda-sim, or any): the .cu files compiled by the tsan toolkit's nvcc (make
# -C tools/cuda-sim tsan) with the build's own flags, linked with the build's other
# module objects. Run a program with it:
#   LD_PRELOAD=$(g++ -print-file-name=libtsan.so) PIPENET_CUDA_MODULE=OUT.so \
#       BUILD/tests/test_backend_ops softmax layernorm_forward ...
# Usage: tools/cuda-sim/tsan-module.sh BUILD_DIR OUT.so
set -eu
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR OUT.so" >&2; exit 2; }
root=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
out=$2
nvcc=$root/tsan/bin/nvcc
[ -x "$nvcc" ] || { echo "$0: no tsan toolkit: make -C $root tsan" >&2; exit 1; }
[ -f "$build/Makefile" ] && [ -f "$build/pipenet-cuda.so" ] ||
    { echo "$0: $build holds no CUDA build (pipenet-cuda.so)" >&2; exit 1; }
var() { sed -n "s/^$1 = //p" "$build/Makefile" | head -n 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tsan-module.XXXXXX")
trap 'rm -rf "$work"' EXIT
for cu in "$build"/src/math/cuda/*.cu; do
    # shellcheck disable=SC2046
    "$nvcc" $(var NVCCFLAGS) --fmad=false -Xcompiler -fPIC -I"$build/src" -I"$build" \
        $(var DEFS) $(var CUDA_CPPFLAGS) -c -o "$work/$(basename "$cu" .cu).o" "$cu"
done
# the module's other objects (its entry, the NCCL transport), as the build made them
others=$(find "$build/src/mpi" -name 'pipenet_cuda_so-*.o')
# shellcheck disable=SC2046,SC2086
$(var CC) -shared -Wl,--version-script="$build/src/math/cuda/module.map" -o "$out" \
    $others "$work"/*.o $(var CUDA_LDFLAGS) $(var NCCL_LDFLAGS) $(var NCCL_LIBS) $(var CUDA_LIBS)
echo "$out: the CUDA module with ThreadSanitizer kernels"

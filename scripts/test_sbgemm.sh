#!/bin/sh
# The CPU's gemm_bf16 through OpenBLAS's cblas_sbgemm (math/cpu/cpu_bf16.c, under
# configure's HAVE_CBLAS_SBGEMM), on a machine whose OpenBLAS lacks it: builds a
# stand-in sbgemm (tests/sbgemm_shim.c: widen, then sgemm) as a shared library,
# configures a throwaway build against it in build/sbgemm (a copy of this tree,
# without CUDA), and runs test_backend_ops and test_bf16 there; then runs
# test_backend_ops again with the shim made wrong, which must fail. Minutes (a full
# configure and library build). Exit status: 0 when all of that held.
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
out=$top/build/sbgemm
mkdir -p "$out/lib" "$out/tree"
cc -O2 -fPIC -shared -o "$out/lib/libsbgemm_shim.so" tests/sbgemm_shim.c -lopenblas ||
    { echo "test_sbgemm: cannot build the shim" >&2; exit 1; }
git ls-files -co --exclude-standard | while IFS= read -r f; do
    [ -f "$f" ] || continue
    cmp -s "$f" "$out/tree/$f" 2>/dev/null && continue
    mkdir -p "$out/tree/$(dirname "$f")" && cp -p "$f" "$out/tree/$f" && touch "$out/tree/$f"
done
cd "$out/tree" || exit 1
{
    if [ ! -x configure ] || [ configure.ac -nt configure ]; then autoreconf -fi; fi &&
    if [ ! -f Makefile ] || [ configure -nt Makefile ]; then
        ./configure --with-cuda=no --with-nccl=no \
            LIBS="-L$out/lib -lsbgemm_shim -Wl,-rpath,$out/lib"
    fi &&
    make -j2 libpipenet.a && make -j2 tests/test_backend_ops tests/test_bf16
} >"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; echo "test_sbgemm: the build failed ($out/build.log)" >&2; exit 1; }
grep -q '^#define HAVE_CBLAS_SBGEMM 1' config.h ||
    { echo "FAIL: configure did not find the shim's cblas_sbgemm (config.log)"; exit 1; }
status=0
SBSHIM_VERBOSE=1 ./tests/test_backend_ops gemm_bf16 >"$out/ops.log" 2>&1
rc=$?
calls=$(sed -n 's/^sbgemm shim: \([0-9]*\) cblas_sbgemm calls$/\1/p' "$out/ops.log")
# 77: no second backend to compare, every case passed on the CPU
if [ $rc -eq 77 ] && [ "${calls:-0}" -gt 0 ]; then
    echo "ok   test_backend_ops gemm_bf16 through cblas_sbgemm ($calls calls)"
else
    echo "FAIL test_backend_ops gemm_bf16: exit $rc, ${calls:-no} sbgemm calls ($out/ops.log)"
    status=1
fi
if CK_FORK=no ./tests/test_bf16 >"$out/bf16.log" 2>&1; then
    echo "ok   test_bf16"
else
    echo "FAIL test_bf16 ($out/bf16.log)"; status=1
fi
SBSHIM_WRONG=1 ./tests/test_backend_ops gemm_bf16 >"$out/wrong.log" 2>&1
if [ $? -eq 1 ] && grep -q '^FAIL: gemm_bf16' "$out/wrong.log"; then
    echo "ok   a wrong sbgemm is caught: $(grep -c '^FAIL: gemm_bf16' "$out/wrong.log") failing runs"
else
    echo "FAIL a wrong sbgemm went unnoticed ($out/wrong.log)"; status=1
fi
exit $status

#!/bin/sh
# The GPU half of the suite on a machine without a GPU (scripts/test.sh runs it after
# the main build's make check): builds the CUDA stand-in (tools/cuda-sim) and runs its
# own cases, then configures a second build of pipenet against it in build/cuda-sim
# (a copy of this tree: Autotools configures one build per source folder, and this
# one is built in place) and runs the GPU tests there, on 4 GPUs that are the CPU.
# Extra arguments are test names for make check (default: $CUDA_SIM_TESTS below).
# Exit status: that of the tests (0 when all passed or skipped).
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
sim=$top/tools/cuda-sim
out=$top/build/cuda-sim
jobs=$(nproc 2>/dev/null || echo 2)

CUDA_SIM_TESTS="tests/test_cuda tests/test_backend_ops tests/test_cuda_module.sh \
tests/test_model tests/test_cuda_train.sh tests/test_cuda_snapshot.sh \
tests/test_cuda_infer.sh tests/test_cuda_transport.sh tests/test_device.sh \
tests/test_transport.sh tests/test_cuda_ctr.sh tests/test_cuda_sparse.sh \
tests/test_cuda_ranks.sh tests/test_infer_stages.sh tests/test_shard_optimizer.sh \
tests/test_network_bf16 tests/test_fan_out.sh"
[ $# -gt 0 ] && CUDA_SIM_TESTS="$*"

echo "== the CUDA stand-in (tools/cuda-sim)"
make -s -C "$sim" all >/dev/null || { echo "test_cuda_sim: cannot build $sim" >&2; exit 1; }
make -s -C "$sim" tsan >/dev/null 2>&1 || echo "(no ThreadSanitizer toolkit: its cases skip)"
"$sim/tests/run.sh" >"$sim/check.log" 2>&1
sim_status=$?
tail -n 1 "$sim/check.log"
[ $sim_status -eq 0 ] || { grep -A8 "^FAIL" "$sim/check.log"; }

echo "== pipenet against the stand-in (build/cuda-sim)"
# The tree's files (tracked, and new ones git does not ignore), copied where they
# changed only, so that make rebuilds what changed and nothing else.
mkdir -p "$out"
if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -co --exclude-standard
else
    find . -path ./build -prune -o -path ./.git -prune -o -type f -print | sed 's|^\./||'
fi | while IFS= read -r f; do
    [ -f "$f" ] || continue
    cmp -s "$f" "$out/$f" 2>/dev/null && continue
    mkdir -p "$out/$(dirname "$f")" && cp -p "$f" "$out/$f" && touch "$out/$f"
done
cd "$out" || exit 1
# make knows nothing of the toolkit's headers and rewriter: the CUDA objects go when
# the toolkit changed since the last build
if [ -f .toolkit-stamp ] && [ -n "$(find "$sim/include" "$sim/libexec" "$sim/bin" -newer .toolkit-stamp 2>/dev/null)" ]; then
    rm -f src/math/cuda/*.o pipenet-cuda.so
fi
log=$out/build.log
{
    if [ ! -x configure ] || [ configure.ac -nt configure ]; then autoreconf -fi; fi &&
    if [ ! -f Makefile ] || [ configure -nt Makefile ] || ! grep -q "with-cuda=$sim" config.status; then
        ./configure --with-cuda="$sim" --with-nccl="$sim"
    fi &&
    make -j"$jobs"
} >"$log" 2>&1 || { tail -n 40 "$log"; echo "test_cuda_sim: the build against the stand-in failed ($log)" >&2; exit 1; }
touch .toolkit-stamp
grep -A3 "^  CUDA  " "$log" | head -n 4

start=$(date +%s)
# shellcheck disable=SC2086
make -j"$jobs" check TESTS="$CUDA_SIM_TESTS" >"$out/check.log" 2>&1
status=$?
echo "GPU tests on the stand-in: $(($(date +%s) - start)) s"
for t in $CUDA_SIM_TESTS; do
    printf '  %-34s %s\n' "$(basename "$t")" \
        "$(grep -E '^:test-result: ' "$t.trs" 2>/dev/null | cut -d' ' -f2)"
done
[ $status -eq 0 ] || cat test-suite.log
[ $status -eq 0 ] && [ $sim_status -eq 0 ]

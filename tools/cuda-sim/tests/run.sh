#!/bin/sh
# The stand-in's own checks (make -C tools/cuda-sim check): builds tests/cases.cu with
# this toolkit's nvcc and runs each case, expecting the right result where the code is
# right, a wrong result where a barrier or a stream wait is missing (in every block and
# thread order), and for every other mistake the error code a GPU gives or a message
# naming the kernel, block and thread. Prints one line per case; exit 1 if any failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/cuda-sim-check.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$root/bin/nvcc" -O1 -o "$work/cases" "$root/tests/cases.cu" -lcublas || { echo "FAIL: cases.cu does not build"; exit 1; }
failed=0 ran=0

# expect CASE STATUS REGEX [ORDER]: the case exits with STATUS (abort: 134) and its
# output matches REGEX (extended)
expect() {
    name=$1 want=$2 pattern=$3 order=${4:-in-order}
    PN_CUDA_SIM_ORDER=$order "$work/cases" "$name" >"$work/out" 2>&1
    got=$?
    ran=$((ran + 1))
    if [ "$got" -eq "$want" ] && grep -Eq "$pattern" "$work/out"; then
        echo "ok   $name ($order): $(grep -E "$pattern" "$work/out" | head -n 1 | cut -c1-150)"
    else
        echo "FAIL $name ($order): exit $got (want $want), output:"
        sed 's/^/     /' "$work/out" | head -n 8
        failed=$((failed + 1))
    fi
}

# The removed barrier lets warp 0 read the other warps' partial sums before they are
# written: in order (warp 0 runs first) and in a random order it does; in reverse
# order every other warp has written first and the sum comes out right, which is
# why the orders are a setting: race-free code is right in all of them.
for order in in-order reverse random:1 random:2; do
    expect sums 0 "result right" "$order"
    [ "$order" = reverse ] || expect removed-barrier 1 "result wrong" "$order"
    expect streams 0 "result right" "$order"
    expect missing-stream-wait 1 "result wrong" "$order"
done
expect event-not-ready 0 "first query: device not ready"
expect host-pointer-arg 134 "kernel copy .*argument 1 holds 0x[0-9a-f]+, which is host memory"
expect host-pointer-in-struct 134 "kernel fill_view .*argument 1 \(at byte 0\) holds 0x[0-9a-f]+, which is host memory"
expect freed-pointer-arg 134 "kernel scale .*argument 1 points into freed device memory"
expect divergent-barrier 134 "kernel early_exit_barrier .*block \(0,0,0\) thread \(0,0,0\): divergent __syncthreads at cases.cu:[0-9]+: thread \(16,0,0\) of the block has ended"
expect barrier-elsewhere 134 "kernel two_barriers .*divergent __syncthreads at cases.cu:[0-9]+: thread \([0-9]+,0,0\) waits at __syncthreads cases.cu:[0-9]+"
expect shuffle-exited-lane 134 "kernel shuffle_exited .*names lane 16, which has ended"
expect shuffle-outside-mask 134 "kernel shuffle_outside_mask .*thread \(15,0,0\): the shuffle at cases.cu:[0-9]+ reads lane 16, which its mask 0xffff leaves out"
expect host-reads-device 134 "host code read device memory at 0x[0-9a-f]+: byte 0 of an allocation of 4096 bytes \\(from main \\(cases.cu:[0-9]+\\)\\)"
expect kernel-reads-past-end 134 "kernel read_past .*block \(4,0,0\) thread \(0,0,0\) read address 0x[0-9a-f]+: 0 bytes past the end of an allocation of 4096 bytes"
expect grid-zero 0 "launch: invalid configuration argument"
expect block-too-big 0 "launch: invalid configuration argument"
expect grid-y-too-big 0 "launch: invalid configuration argument"
expect over-launch-bounds 0 "launch: too many resources requested for launch"
expect copy-past-end 0 "copy: invalid argument"
expect copy-wrong-kind 0 "copy: invalid argument"
expect error-kept 0 "malloc: out of memory; launch, then cudaGetLastError: out of memory"
expect racy-max 0 "result right"
expect gemm-ex-bf16 0 "result right"

# NCCL over MPI, two ranks (mpirun from the PATH, or $MPIRUN)
mpirun=${MPIRUN:-mpirun}
if command -v "$mpirun" >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1; then
    # shellcheck disable=SC2046
    if "$root/bin/nvcc" -O1 -DOMPI_SKIP_MPICXX $(mpicc -showme:compile) -o "$work/nccl_cases" \
        "$root/tests/nccl_cases.cu" -L"$root/lib64" -lnccl $(mpicc -showme:link) 2>"$work/build"; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        # expect_mpi CASE STATUS REGEX: under mpirun -np 2 (30 s at most: 124 past that)
        expect_mpi() {
            PN_CUDA_SIM_SYNC_WARN_S=2 timeout "${4:-30}" "$mpirun" --oversubscribe -np 2 \
                "$work/nccl_cases" "$1" >"$work/out" 2>&1
            got=$?
            ran=$((ran + 1))
            if [ "$got" -eq "$2" ] && grep -Eq "$3" "$work/out"; then
                echo "ok   nccl $1: $(grep -E "$3" "$work/out" | head -n 1 | cut -c1-150)"
            else
                echo "FAIL nccl $1: exit $got (want $2), output:"
                sed 's/^/     /' "$work/out" | head -n 10
                failed=$((failed + 1))
            fi
        }
        expect_mpi collectives 0 "rank 1: collectives right"
        expect_mpi grouped-sends 0 "rank 0: got 2 from rank 1"
        expect_mpi lazy-connect 0 "the first send returned ncclInProgress and connected after 1"
        expect_mpi busy-comm 0 "ncclSend while the previous call on this non-blocking communicator is in progress"
        expect_mpi duplicate-gpu 0 "Duplicate GPU detected: ranks 0 and 1"
        expect_mpi abort 0 "after ncclCommAbort the stream went on"
        # both ranks send first as two calls: each send waits for a receive queued
        # behind the other's send, as on GPUs; the wait says so, then times out
        expect_mpi ungrouped-sends 124 "has waited 2 s for NCCL group of ncclSend 16 bytes to rank 1 .*queued by main \(nccl_cases.cu" 8
    else
        echo "FAIL nccl_cases.cu does not build:"; head -n 20 "$work/build"
        failed=$((failed + 1))
    fi
else
    echo "skip the NCCL cases: no $mpirun or mpicc"
fi

# The ThreadSanitizer toolkit (make tsan), where built: the race above is reported.
if [ -x "$root/tsan/bin/nvcc" ] && [ -x "$root/tsan/lib64/libcudart.so" ]; then
    if "$root/tsan/bin/nvcc" -O1 -o "$work/cases-tsan" "$root/tests/cases.cu" -lcublas 2>"$work/build"; then
        for name in racy-max sums; do
            TSAN_OPTIONS=halt_on_error=0 "$work/cases-tsan" "$name" >"$work/out" 2>&1
            ran=$((ran + 1))
            races=$(grep -c "WARNING: ThreadSanitizer: data race" "$work/out")
            want=0; [ "$name" = racy-max ] && want=1
            if { [ "$want" = 1 ] && [ "$races" -gt 0 ] && grep -q "racy_max" "$work/out"; } ||
               { [ "$want" = 0 ] && [ "$races" -eq 0 ] && grep -q "result right" "$work/out"; }; then
                echo "ok   $name (tsan): $races data race report(s)"
            else
                echo "FAIL $name (tsan): $races data race report(s), output:"
                sed 's/^/     /' "$work/out" | head -n 30
                failed=$((failed + 1))
            fi
        done
    else
        echo "FAIL the tsan toolkit cannot build cases.cu:"; head -n 20 "$work/build"
        failed=$((failed + 1))
    fi
else
    echo "skip the ThreadSanitizer cases: no tsan toolkit (make -C $root tsan)"
fi
echo "$ran cases, $failed failed"
[ "$failed" -eq 0 ]

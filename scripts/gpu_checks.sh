#!/bin/sh
# Runs pipenet's GPU checks in order from a bundle (scripts/gpu_bundle.sh, unpacked)
# on a machine with a GPU, from the repository root (for tests/, bench/, models/):
#   tests: nvidia-smi -L, test_backend_ops (every backend slot against the CPU),
#          test_cuda (GEMM, the pool, a bad id), test_model (pn_model_load_on),
#          test_cuda_train.sh (a GPT trained on cuda against the cpu),
#          test_cuda_snapshot.sh (snapshots across devices, infer --device cuda),
#          test_cuda_infer.sh (infer and generate on cuda against the cpu),
#          test_cuda_ctr.sh (the click-through model on cuda against the cpu; needs
#          the bundle's h5_fixture), test_cuda_sparse.sh (a DeepFM over a CSR
#          input, embedding_bag and sparse_fc, on cuda against the cpu; the same;
#          with the bundle's mpirun also 2 replicas, tables whole and sharded),
#          test_cuda_ranks.sh (2 ranks on the one GPU: nccl refused, mpi's host
#          staging across stages and replicas; needs the bundle's mpirun),
#          test_infer_stages.sh (infer and generate split over ranks equal one
#          process, on the cpu and with the GPT on cuda; the bundle's mpirun and
#          h5_fixture; its ulimit -v part is CI's, left out here),
#          test_shard_optimizer.sh (--shard-optimizer: its CPU cases, and on cuda the
#          unsharded hash over --transport mpi; needs the bundle's mpirun and
#          /usr/bin/time), test_network_bf16 (bf16 arguments on cuda:0: planner on
#          and off, cut networks, against fp32; needs the bundle's test binary),
#          test_fan_out.sh (a gradient read on several later stages, 3 ranks on the
#          one GPU over --transport mpi, against one process)
#   bench: bench/bench_gpu.sh (pipenet against PyTorch, about 2-4 minutes)
# Each step's output goes to OUTDIR/<step>.log, one line per step to
# OUTDIR/summary.txt (PASS, FAIL with its exit status, SKIP, TIMEOUT); a failing
# step does not stop the later ones. Each has a time limit; the limits add up to
# BUDGET_S, 540 s, under the 600 s of one device call, which also starts the
# machine, unpacks the bundle and copies OUTDIR back (printed at the start). The
# bench takes what the tests leave of it (all of it when run alone). Exit 0 when
# nothing failed.
#
# Usage: scripts/gpu_checks.sh BUNDLE_DIR OUTDIR [tests|bench|all]   (default all)
# Ran on one NVIDIA H200 on 2026-11-25 and 2026-11-26 (every step PASS); the tests run on
# the CUDA stand-in in CI (scripts/test_cuda_sim.sh), the NCCL ones too (they need
# several GPUs, which a device call here has not: docs/running.md, Transports).
set -u
[ $# -ge 2 ] || { echo "usage: $0 BUNDLE_DIR OUTDIR [tests|bench|all]" >&2; exit 2; }
bundle=$(cd "$1" && pwd) || exit 2
out=$2 part=${3:-all}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
export PIPENET=$bundle/pipenet CK_FORK=no OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the bundle's mpirun (scripts/gpu_bundle.sh), for the tests that start several ranks
[ -x "$bundle/mpirun" ] && export PATH="$bundle:$PATH"
# GNU time for test_shard_optimizer's peak RSS, from the bundle where the machine has none
[ -x /usr/bin/time ] || [ ! -x "$bundle/bin/time" ] || cp "$bundle/bin/time" /usr/bin/time 2>/dev/null
failed=0

# Each step's time limit (s); the bench's is what is left of BUDGET_S.
BUDGET_S=540
T_SMI=10 T_BACKEND_OPS=40 T_CUDA=30 T_MODEL=30 T_TRAIN=40 T_SNAPSHOT=40 T_INFER=30 T_CTR=40
T_SPARSE=40 T_RANKS=40 T_STAGED=50 T_ZERO=80 T_BF16=20 T_FAN=40
T_TESTS=$((T_SMI + T_BACKEND_OPS + T_CUDA + T_MODEL + T_TRAIN + T_SNAPSHOT + T_INFER + T_CTR + T_SPARSE + T_RANKS + T_STAGED + T_ZERO + T_BF16 + T_FAN))
tests="nvidia_smi $T_SMI, test_backend_ops $T_BACKEND_OPS, test_cuda $T_CUDA, test_model $T_MODEL"
tests="$tests, test_cuda_train $T_TRAIN, test_cuda_snapshot $T_SNAPSHOT, test_cuda_infer $T_INFER"
tests="$tests, test_cuda_ctr $T_CTR, test_cuda_sparse $T_SPARSE, test_cuda_ranks $T_RANKS"
tests="$tests, test_infer_stages $T_STAGED, test_shard_optimizer $T_ZERO"
tests="$tests, test_network_bf16 $T_BF16, test_fan_out $T_FAN"
case $part in
tests) total=$T_TESTS limits=$tests ;;
bench) T_BENCH=$BUDGET_S total=$BUDGET_S limits="bench_gpu $BUDGET_S" ;;
all) T_BENCH=$((BUDGET_S - T_TESTS)) total=$BUDGET_S limits="$tests, bench_gpu $T_BENCH" ;;
*) echo "$0: part '$part' is not tests, bench or all" >&2; exit 2 ;;
esac
echo "time limits (s): $limits; $total in all (one device call has 600)" | tee "$out/summary.txt"

step() { # step NAME SECONDS COMMAND...
    name=$1 limit=$2; shift 2
    t0=$(date +%s)
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    case $rc in
    0) verdict=PASS ;;
    77) verdict=SKIP ;;
    124 | 137) verdict="TIMEOUT after ${limit} s" failed=1 ;;
    *) verdict="FAIL (exit $rc)" failed=1 ;;
    esac
    line="$name: $verdict, $(($(date +%s) - t0)) s"
    echo "$line" | tee -a "$out/summary.txt"
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || tail -n 15 "$out/$name.log"
}

if [ "$part" = tests ] || [ "$part" = all ]; then
    step nvidia_smi $T_SMI nvidia-smi -L
    step test_backend_ops $T_BACKEND_OPS "$bundle/test_backend_ops"
    step test_cuda $T_CUDA "$bundle/test_cuda"
    step test_model $T_MODEL "$bundle/test_model"
    step test_cuda_train $T_TRAIN sh tests/test_cuda_train.sh
    step test_cuda_snapshot $T_SNAPSHOT sh tests/test_cuda_snapshot.sh
    step test_cuda_infer $T_INFER sh tests/test_cuda_infer.sh
    # the bundle's h5_fixture writes its data (ctr_fixture.sh looks in TESTS_BUILDDIR)
    step test_cuda_ctr $T_CTR env TESTS_BUILDDIR="$bundle" sh tests/test_cuda_ctr.sh
    step test_cuda_sparse $T_SPARSE env TESTS_BUILDDIR="$bundle" sh tests/test_cuda_sparse.sh
    step test_cuda_ranks $T_RANKS sh tests/test_cuda_ranks.sh
    step test_infer_stages $T_STAGED env TESTS_BUILDDIR="$bundle" INFER_STAGES_NO_MEMORY=1 \
        sh tests/test_infer_stages.sh
    step test_shard_optimizer $T_ZERO sh tests/test_shard_optimizer.sh
    step test_network_bf16 $T_BF16 env srcdir=. "$bundle/test_network_bf16"
    step test_fan_out $T_FAN env TESTS_BUILDDIR="$bundle" sh tests/test_fan_out.sh
fi
if [ "$part" = bench ] || [ "$part" = all ]; then
    step bench_gpu "$T_BENCH" sh bench/bench_gpu.sh "$out/bench"
fi
exit $failed

#!/bin/sh
# Several ranks on ONE GPU (the device machines lent to sessions here have one; in CI the
# CUDA stand-in with PN_CUDA_SIM_DEVICES=1): the tiny GPT of lm_fixture.sh on 2 ranks,
# every rank on cuda:0.
#  - --transport nccl is refused before training, naming the two ranks that share the
#    GPU (NCCL does not support one GPU twice in a communicator), with no hang;
#  - --transport mpi (host staging of device memory) trains 2 stages and 2 replicas:
#    the layout line puts both ranks on cuda:0, and with --deterministic the 1-process
#    cuda run, 2 stages and 2 replicas print one parameter hash (the stage links and
#    the replicas' gradient gather through host memory change no bit);
#  - 2 replicas on cuda against 2 replicas on cpu: every step's loss within
#    gpu_fixture.sh's loss_rtol (cuBLAS adds in another order than OpenBLAS).
# Skips (77) without CUDA in the build, a GPU, or mpirun.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/gpu_fixture.sh"
. "$here/lm_fixture.sh"
export PN_CUDA_SIM_DEVICES=1 # the stand-in's GPUs: one, as on the device machines
need_gpu
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
export OPENBLAS_NUM_THREADS=1

gpt_job 8

# train NAME RANKS ARGS...: the run's output in $tmp/NAME, its metrics in $tmp/NAME.m
train() {
    run=$1 np=$2; shift 2
    timeout 300 mpirun --oversubscribe -np "$np" "$PIPENET" train "$tmp/gpt.json" \
        --data "$tmp/lm/train.h5" --eval= --threads 1 --stall-timeout 60 \
        --metrics "$tmp/$run.m" "$@" >"$tmp/$run" 2>&1
}

# NCCL on two ranks of one GPU: refused, naming them
if train nccl 2 --device cuda --stages 2 --transport nccl; then
    cat "$tmp/nccl"; fail "--transport nccl ran with 2 ranks on one GPU"
fi
grep -q "transport nccl: ranks 0 and 1 share GPU 0 of one node" "$tmp/nccl" || {
    # a build without NCCL says so instead: the refusal is then that one
    grep -q "built without NCCL" "$tmp/nccl" || { cat "$tmp/nccl"; fail "the refusal does not name ranks 0 and 1"; }
}
echo "ok: $(grep -m1 'transport nccl' "$tmp/nccl")"

# MPI's host staging: 1 process, 2 stages, 2 replicas on cuda:0; one hash
hashes=
for layout in "one 1 --stages 1 --micro-batches 8" "stages 2 --stages 2 --micro-batches 8" \
    "replicas 2 --stages 1 --micro-batches 4"; do
    # shellcheck disable=SC2086
    set -- $layout
    name=det_$1 ranks=$2; shift 2
    train "$name" "$ranks" --device cuda --transport mpi --deterministic "$@" ||
        { cat "$tmp/$name"; fail "$name on cuda"; }
    if [ "$ranks" -gt 1 ]; then
        grep -q "^layout: .*device cuda:0 (rank 0, .*cuda:0 (rank 1, " "$tmp/$name" ||
            { cat "$tmp/$name"; fail "$name: the layout line does not put both ranks on cuda:0"; }
    fi
    keep_hash "$name" 8
done
one_hash "ranks sharing one GPU give different hashes across layouts"

# 2 replicas on cuda against 2 replicas on cpu
for d in cpu cuda; do
    train "rep_$d" 2 --device $d --transport mpi || { cat "$tmp/rep_$d"; fail "2 replicas on $d"; }
done
same_losses "$tmp/rep_cuda.m" "$tmp/rep_cpu.m" 1 8 || fail "2 replicas: cuda and cpu losses differ"
echo "PASS: 2 ranks on one GPU: nccl refused naming them; mpi gives one hash on 1, 2 stages and 2 replicas; cuda's losses follow the cpu's"

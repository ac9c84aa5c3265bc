#!/bin/sh
# The NCCL transport against the MPI transport on GPU ranks (in CI: the CUDA stand-in,
# tools/cuda-sim; elsewhere a machine with 4 GPUs): the tiny GPT of lm_fixture.sh
# trained on 2 ranks as 2 stages, on 4 ranks as 2 replicas x 2 stages, and on 2 ranks
# with the interleaved schedule (2 virtual stages, so links to the rank itself stay on
# MPI), each with --transport nccl and with --transport mpi: every step's loss within
# 1e-6 (relative; both move the same values, a replica sum may add them in another
# order) and the layout line naming the transport. Then --deterministic on GPUs: one
# process, 2 stages, 2 x 2 with NCCL and with MPI, and interleaved, all with
# micro-batches of 2 samples, give one parameter hash; in --precision bf16 too
# (another). And a rank that stops is named
# by the stall watchdog. Skips (77) without CUDA or NCCL in the build, or with fewer
# than 4 GPUs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/gpu_fixture.sh"
. "$here/lm_fixture.sh"
need_gpu
export OPENBLAS_NUM_THREADS=1

gpt_job 6

# train NAME RANKS ARGS...: the run's output in $tmp/NAME, its metrics in $tmp/NAME.m
train() {
    run=$1 np=$2; shift 2
    mpirun --oversubscribe -np "$np" "$PIPENET" train "$tmp/gpt.json" \
        --data "$tmp/lm/train.h5" --eval= --threads 1 --device cuda --stall-timeout 120 \
        --metrics "$tmp/$run.m" "$@" >"$tmp/$run" 2>&1
}

# NCCL where it can run, else a skip saying why
if ! train probe 4 --stages 2 --transport nccl --steps 1; then
    case $(cat "$tmp/probe") in
    *"built without NCCL"* | *"share GPU"*)
        echo "SKIP: $(grep -m1 "transport nccl" "$tmp/probe")"; exit 77 ;;
    esac
    cat "$tmp/probe"; fail "--transport nccl on 4 GPU ranks"
fi

# same_losses_exact A B: every step's loss within 1e-6 (relative)
same_losses_exact() {
    for s in 1 2 3 4 5 6; do
        a=$(step_loss "$1" "$s") b=$(step_loss "$2" "$s")
        [ -n "$a" ] && [ -n "$b" ] || fail "no loss of step $s in $1 or $2"
        awk -v a="$a" -v b="$b" -v s="$s" 'BEGIN {
            d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b
            printf "  step %d: %s %s (relative difference %.1e)\n", s, a, b, (m > 0 ? d / m : d)
            exit !(d <= 1e-6 * m) }' || return 1
    done
}

# compare NAME RANKS ARGS...: NAME_nccl against NAME_mpi
compare() {
    name=$1 ranks=$2; shift 2
    for t in nccl mpi; do
        train "${name}_$t" "$ranks" "$@" --transport $t ||
            { cat "$tmp/${name}_$t"; fail "$name with --transport $t"; }
        grep -q "^layout: .*transport $t, device cuda:0 (rank 0" "$tmp/${name}_$t" ||
            { cat "$tmp/${name}_$t"; fail "$name: the layout line does not say transport $t"; }
    done
    echo "$name, nccl against mpi:"
    same_losses_exact "$tmp/${name}_nccl.m" "$tmp/${name}_mpi.m" ||
        fail "$name: the losses of nccl and mpi differ"
}
compare stages 2 --stages 2
compare replicas 4 --stages 2
compare interleaved 2 --stages 2 --schedule interleaved --virtual-stages 2

# --deterministic: one hash on every layout and transport, in fp32 and in bf16 (whose
# links carry bf16: NCCL's payloads as bytes), and bf16's is not fp32's
fp32_hash=
for precision in fp32 bf16; do
    hashes=
    # (layouts with one micro-batch size, 2 samples: docs/running.md, bit-identical layouts)
    for layout in "one 1 --stages 1 --micro-batches 8" \
        "stages 2 --stages 2 --micro-batches 8 --transport nccl" \
        "replicas_nccl 4 --stages 2 --micro-batches 4 --transport nccl" \
        "replicas_mpi 4 --stages 2 --micro-batches 4 --transport mpi" \
        "interleaved 2 --stages 2 --micro-batches 8 --schedule interleaved --virtual-stages 2 --transport nccl"; do
        # shellcheck disable=SC2086
        set -- $layout
        name=det_${precision}_$1 ranks=$2; shift 2
        train "$name" "$ranks" "$@" --deterministic --precision $precision ||
            { cat "$tmp/$name"; fail "$name --deterministic"; }
        keep_hash "$name" 6
    done
    one_hash "--deterministic --precision $precision on GPUs gives different hashes across layouts"
    # shellcheck disable=SC2086
    set -- $hashes
    [ "$1" != "$fp32_hash" ] || fail "bf16 on GPUs gives fp32's hash $1: nothing was rounded"
    fp32_hash=$1
done

# A rank that stops (SIGSTOP at step 3, PIPENET_FAULT) is seen by the stall watchdog
# on NCCL's waits too: the job ends within 40 s with one error naming it, and leaves
# no process behind.
leftovers() { pgrep -f "train $tmp/gpt.json"; }
stall_cleanup() { for p in $(leftovers); do kill -CONT "$p"; kill -KILL "$p"; done 2>/dev/null; }
trap 'stall_cleanup; rm -rf "$tmp"' EXIT
start=$(date +%s)
PIPENET_FAULT=3:3:stop timeout 120 mpirun --oversubscribe -np 4 "$PIPENET" train "$tmp/gpt.json" \
    --data "$tmp/lm/train.h5" --eval= --threads 1 --device cuda --stages 2 --transport nccl \
    --steps 100 --stall-timeout 5 >"$tmp/stall" 2>&1
rc=$? secs=$(($(date +%s) - start))
grep -q "^PIPENET_FAULT at step 3" "$tmp/stall" || { cat "$tmp/stall"; fail "the stall did not happen"; }
[ $rc -ne 124 ] && [ $rc -ne 0 ] || { cat "$tmp/stall"; fail "a stalled rank on NCCL: exit $rc"; }
[ $secs -le 40 ] || fail "the job took $secs s to end after a rank stopped"
n=$(grep -c "pipenet: error: rank [0-2] .*no progress for 5 s (--stall-timeout) waiting for .*from rank 3 (stage 1, replica 1)" "$tmp/stall")
[ "$n" -eq 1 ] || { cat "$tmp/stall"; fail "the stopped rank is named $n times"; }
sleep 1
[ -z "$(leftovers)" ] || fail "processes left behind: $(leftovers)"
echo "ok: a stopped rank on NCCL ends the job in $secs s: $(grep 'pipenet: error' "$tmp/stall")"
echo "PASS: nccl trains as mpi on 2 stages, 2 x 2 and interleaved; --deterministic gives one hash (fp32, and bf16 another); a stopped rank is named"

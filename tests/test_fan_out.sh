#!/bin/sh
# A node whose output fans out to several consumers on one later stage and to others
# on further stages: its gradient travels as a chain through the consumer chunks in
# reverse order (stage_setup.c, link_node), so every layout adds the contributions
# in one process's order. Under --deterministic each layout below gives the
# 1-process parameter hash: fc1 (stage 0, also read there by h0) feeds three layers
# on stage 1 and one on stage 2; h0 skips from stage 0 to stage 2. 3 stages under
# gpipe and 1f1b, with --recompute, --no-share-memory, 2 replicas; a 4-chunk model
# (fc1 read on chunks 0..3) on 4 stages and interleaved on 2 stages x 2 virtual
# stages (the chain crosses ranks both ways, or stays on one), with 2 replicas and
# --recompute; fan3 also in bf16; where a reader's stage goes down the list, a
# warning. With GPUs, 3 stages over the NCCL transport and over MPI against one GPU
# process.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/gpu_fixture.sh"
H5=${TESTS_BUILDDIR:-$here}/h5_fixture
[ -x "$H5" ] || { echo "SKIP: $H5 not built (make check builds it)"; exit 77; }
export OPENBLAS_NUM_THREADS=1

# 512 rows of 64 features (67 values cycled, so rows differ) and 10 classes
# shellcheck disable=SC2046
"$H5" typed "$tmp/d.h5" features float32 512x64 $(awk 'BEGIN { for (i = 0; i < 67; i++)
    printf "%.4f ", ((i * 37) % 67) / 67 - 0.5 }') || fail "write features"
"$H5" typed "$tmp/d.h5" labels int32 512 3 1 4 1 5 9 2 6 5 3 5 8 9 7 0 || fail "write labels"

head='{"name": "fan", "inputs": {"x": {"dataset": "features", "size": 64},
 "y": {"dataset": "labels", "ids": true}},'
tail='"train": {"batch": 16, "seed": 3, "optimizer": {"type": "adam", "lr": 0.01}}}'
cat >"$tmp/fan3.json" <<EOF
$head "layers": [
 {"name": "fc1", "type": "fc", "input": "x", "size": 32, "act": "tanh", "stage": 0},
 {"name": "h0", "type": "fc", "input": "fc1", "size": 32, "stage": 0},
 {"name": "fc2", "type": "fc", "input": "fc1", "size": 32, "act": "tanh", "stage": 1},
 {"name": "fc2b", "type": "fc", "input": "fc1", "size": 32, "stage": 1},
 {"name": "fc2c", "type": "fc", "input": "fc1", "size": 32, "act": "sigmoid", "stage": 1},
 {"name": "fc3", "type": "fc", "input": "fc1", "size": 32, "act": "tanh", "stage": 2},
 {"name": "sum", "type": "add", "input": ["fc2", "fc2b", "fc2c", "fc3", "h0"], "stage": 2},
 {"name": "out", "type": "fc", "input": "sum", "size": 10, "stage": 2},
 {"name": "loss", "type": "softmax_xent", "input": ["out", "y"], "stage": 2}],
 $tail
EOF
cat >"$tmp/fan4.json" <<EOF
$head "layers": [
 {"name": "fc1", "type": "fc", "input": "x", "size": 32, "act": "tanh", "stage": 0},
 {"name": "h0", "type": "fc", "input": "fc1", "size": 32, "stage": 0},
 {"name": "fc2", "type": "fc", "input": "fc1", "size": 32, "act": "tanh", "stage": 1},
 {"name": "fc2b", "type": "fc", "input": "fc1", "size": 32, "stage": 1},
 {"name": "fc3", "type": "fc", "input": "fc1", "size": 32, "act": "tanh", "stage": 2},
 {"name": "mid", "type": "add", "input": ["fc2", "fc2b", "fc3"], "stage": 2},
 {"name": "fc4", "type": "fc", "input": "fc1", "size": 32, "act": "tanh", "stage": 3},
 {"name": "fc4b", "type": "fc", "input": "fc1", "size": 32, "stage": 3},
 {"name": "sum", "type": "add", "input": ["mid", "fc4", "fc4b", "h0"], "stage": 3},
 {"name": "out", "type": "fc", "input": "sum", "size": 10, "stage": 3},
 {"name": "loss", "type": "softmax_xent", "input": ["out", "y"], "stage": 3}],
 $tail
EOF
# fc1 not read on chunk 2: the chain goes from chunk 3 to chunk 1, on one rank when
# interleaved over 2 stages
sed 's/"name": "fc3", "type": "fc", "input": "fc1"/"name": "fc3", "type": "fc", "input": "fc2"/' \
    "$tmp/fan4.json" >"$tmp/fan5.json"
grep -q '"fc3".*"input": "fc2"' "$tmp/fan5.json" || fail "no fc3 on fc2 in fan5.json"
for m in fan3 fan4 fan5; do # one process: the same layers without their stages
    sed 's/, "stage": [0-9]*//' "$tmp/$m.json" >"$tmp/${m}_one.json"
done

# run_hash MODEL RANKS ARGS...: 4 steps; prints the parameter hash, or the run's output
# on stderr and fails
run_hash() {
    model=$1 np=$2; shift 2
    timeout -s KILL 300 mpirun --oversubscribe -np "$np" "$PIPENET" train "$tmp/$model.json" \
        --data "$tmp/d.h5" --eval "" --steps 4 --threads 1 --deterministic \
        --log-every 1000 "$@" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; return 1; }
    sed -n 's/^parameter hash after 4 steps: //p' "$tmp/out" | grep . || {
        cat "$tmp/out" >&2; return 1; }
}

# same MODEL WANT RANKS ARGS...: the layout gives hash WANT
same() {
    model=$1 want=$2 np=$3; shift 3
    got=$(run_hash "$model" "$np" "$@") || fail "$model on $np ranks: $*"
    [ "$got" = "$want" ] || fail "$model on $np ranks ($*): hash $got, one process gives $want"
    echo "ok: $model on $np ranks ($*): $got"
}

one=$(run_hash fan3_one 1 --micro-batches 4) || fail "fan3 on one process"
for sched in gpipe 1f1b; do
    same fan3 "$one" 3 --stages 3 --micro-batches 4 --schedule "$sched"
    same fan3 "$one" 3 --stages 3 --micro-batches 4 --schedule "$sched" --recompute
    same fan3 "$one" 6 --stages 3 --micro-batches 2 --schedule "$sched"
done
same fan3 "$one" 3 --stages 3 --micro-batches 4 --no-share-memory
same fan3 "$one" 6 --stages 3 --micro-batches 2 --recompute --shard-optimizer

! grep -q "is read by" "$tmp/out" || { cat "$tmp/out"; fail "a warning on fan3"; }
# bf16 arguments and links: a layer's sum is rounded, so is each link of the chain's
one=$(run_hash fan3_one 1 --micro-batches 4 --precision bf16) || fail "fan3 bf16 on one process"
same fan3 "$one" 3 --stages 3 --micro-batches 4 --precision bf16
same fan3 "$one" 6 --stages 3 --micro-batches 2 --precision bf16 --schedule gpipe

# a reader listed before an earlier stage's: that order cannot be kept, and is named
sed 's/"name": "fc2b", \(.*\)"stage": 1/"name": "fc2b", \1"stage": 2/' "$tmp/fan3.json" \
    >"$tmp/down.json"
grep -q '"fc2b".*"stage": 2' "$tmp/down.json" || fail "no fc2b on stage 2 in down.json"
expect 0 "layer 'fc1' is read by 'fc2c' on stage 1 after a reader on stage 2" \
    mpirun --oversubscribe -np 3 "$PIPENET" train "$tmp/down.json" --data "$tmp/d.h5" \
    --eval "" --steps 1 --threads 1 --deterministic --micro-batches 4

one=$(run_hash fan4_one 1 --micro-batches 4) || fail "fan4 on one process"
same fan4 "$one" 4 --stages 4 --micro-batches 4 --schedule 1f1b
il="--stages 2 --schedule interleaved --virtual-stages 2"
# shellcheck disable=SC2086
same fan4 "$one" 2 $il --micro-batches 4
# shellcheck disable=SC2086
same fan4 "$one" 2 $il --micro-batches 4 --recompute
# shellcheck disable=SC2086
same fan4 "$one" 4 $il --micro-batches 2
one=$(run_hash fan5_one 1 --micro-batches 4) || fail "fan5 on one process"
# shellcheck disable=SC2086
same fan5 "$one" 2 $il --micro-batches 4

# On GPU ranks (in CI the CUDA stand-in, scripts/test_cuda_sim.sh): the chain over
# the NCCL transport's links and over MPI's, against one GPU process.
(need_gpu) >"$tmp/gpu" 2>&1
case $? in
0) ;;
77) echo "GPU part skipped: $(cat "$tmp/gpu")"; exit 0 ;;
*) cat "$tmp/gpu"; fail "the CUDA module" ;;
esac
one=$(run_hash fan3_one 1 --micro-batches 4 --device cuda) || fail "fan3 on one GPU process"
same fan3 "$one" 3 --stages 3 --micro-batches 4 --device cuda --transport mpi
if run_hash fan3 3 --stages 3 --micro-batches 4 --device cuda --transport nccl \
    >"$tmp/nccl" 2>/dev/null; then
    [ "$(cat "$tmp/nccl")" = "$one" ] || fail "fan3 on 3 GPU ranks over NCCL: hash" \
        "$(cat "$tmp/nccl"), one process gives $one"
    echo "ok: fan3 on 3 GPU ranks over NCCL: $one"
else # NCCL needs a GPU per rank
    case $(cat "$tmp/out") in
    *"built without NCCL"* | *"share GPU"*) echo "NCCL skipped: $(grep -m1 nccl "$tmp/out")" ;;
    *) cat "$tmp/out"; fail "fan3 on 3 GPU ranks over NCCL" ;;
    esac
fi
exit 0

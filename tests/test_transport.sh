#!/bin/sh
# The transport (--transport, "transport" in the model's train section; its names
# are one table, enumerated by tests/test_choices.c): nccl where it cannot run (a
# build without NCCL, ranks on the cpu) is a clear error before the data is opened,
# on one process and under mpirun (one message); auto on cpu ranks takes mpi, says so
# in the layout line and trains as mpi does; a bad value is a usage or config error.
# The NCCL transport itself needs GPUs (docs/running.md, Transports); its choice is
# tests/test_transport.c.
set -u
. "$(dirname "$0")/script_fixture.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json
CUDA_VISIBLE_DEVICES= # every rank on the cpu, GPU or not
export CUDA_VISIBLE_DEVICES

why="transport nccl: \(this pipenet was built without NCCL\|rank 0 trains on the cpu\)"

# the error comes before the data is opened (this file does not exist)
expect 1 "$why" "$PIPENET" train "$model" --data "$tmp/none.h5" --transport nccl
grep -q "none.h5" "$tmp/out" && fail "the data was opened before the transport was chosen"
sed 's/"train": {/"train": {"transport": "nccl", /' "$model" >"$tmp/nccl.json"
grep -q '"transport": "nccl"' "$tmp/nccl.json" || fail "could not add train.transport to $model"
expect 1 "$why" "$PIPENET" train "$tmp/nccl.json" --data "$tmp/none.h5"
# the option wins over the file
expect 1 "none.h5" "$PIPENET" train "$tmp/nccl.json" --data "$tmp/none.h5" --transport mpi
# under mpirun, replicas and stages: every rank fails at setup, the message comes once
expect 1 "$why" mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --stages 2 \
    --data "$tmp/none.h5" --transport nccl
[ "$(grep -c "transport nccl:" "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one message from 2 ranks"; }
grep -q "none.h5" "$tmp/out" && fail "the data was opened before the transport was chosen (2 ranks)"
expect 1 "$why" mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --stages 1 \
    --data "$tmp/none.h5" --transport nccl
# bad values
expect 2 "--transport: expected .*, got 'gloo'" "$PIPENET" train "$model" \
    --transport gloo
sed 's/"train": {/"train": {"transport": "gloo", /' "$model" >"$tmp/gloo.json"
expect 1 "train.transport: expected a transport" "$PIPENET" train "$tmp/gloo.json" \
    --data "$tmp/none.h5"
"$PIPENET" train --help | grep -q -- "--transport T" || fail "train --help lacks --transport"
echo "ok: --transport nccl on cpu ranks is an error before the data; bad values refused"

SRC=/usr/share/datasets/fashion-mnist
[ -d "$SRC" ] || { echo "SKIP: $SRC not installed: no training run"; exit 0; }
"$PIPENET" import fashion-mnist --src "$SRC" --out "$tmp/fm" >/dev/null || fail "import"
run() { # run NAME ARGS...: 3 steps on 2 replicas x 2 stages
    name=$1; shift
    mpirun --oversubscribe -np 4 "$PIPENET" train "$model" --stages 2 "$@" \
        --data "$tmp/fm/train.h5" --eval= --steps 3 --threads 1 --log-every 1000 \
        >"$tmp/$name" 2>&1 || { cat "$tmp/$name"; fail "$name exited non-zero"; }
}
run auto
run mpi --transport mpi
grep -q "^layout: .*, transport mpi, device cpu$" "$tmp/auto" ||
    { cat "$tmp/auto"; fail "auto on cpu ranks does not name transport mpi in the layout line"; }
[ "$(grep "parameter hash" "$tmp/auto")" = "$(grep "parameter hash" "$tmp/mpi")" ] ||
    fail "auto on the cpu does not train as mpi: $(grep hash "$tmp/auto") vs $(grep hash "$tmp/mpi")"
echo "ok: auto on cpu ranks takes mpi (the layout line says so, the same hash)"

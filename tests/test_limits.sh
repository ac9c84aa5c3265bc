#!/bin/sh
# Limits on Fashion-MNIST (skips, 77, without the Debian package): a layer name of
# exactly the limit trains as a 2-stage pipeline, snapshots and resumes on one
# process with its parameters named whole; one byte more is refused naming the layer;
# an evaluation reports its progress at the cadence of steps.
set -u
. "$(dirname "$0")/script_fixture.sh"
import_fashion_mnist
data="--data $tmp/fm/train.h5 --eval $tmp/fm/test.h5 --threads 1"

# model FILE NAME: a small MLP whose hidden layer is called NAME
model() {
    cat >"$1" <<JSON
{"name": "names", "inputs": {"x": {"dataset": "features", "size": 784},
                             "y": {"dataset": "labels", "ids": true}},
 "layers": [{"name": "$2", "type": "fc", "input": "x", "size": 16, "act": "relu"},
            {"name": "out", "type": "fc", "input": "$2", "size": 10},
            {"name": "loss", "type": "softmax_xent", "input": ["out", "y"]}],
 "train": {"batch": 32, "optimizer": {"type": "adam", "lr": 0.001}}}
JSON
}
name200=$(printf "%0200d" 0 | tr 0 n)

# 1. a name of 200 bytes: 2 stages write the snapshot one process resumes from
model "$tmp/n200.json" "$name200"
mpirun --oversubscribe -np 2 "$PIPENET" train "$tmp/n200.json" $data --steps 4 --stages 2 \
    --snapshot-dir "$tmp/snap" >"$tmp/a.out" 2>&1 || { cat "$tmp/a.out"; fail "2 stages, name of 200 bytes"; }
[ -f "$tmp/snap/snapshot-0000000004.h5" ] || fail "no snapshot: $(cat "$tmp/a.out")"
"$PIPENET" inspect "$tmp/snap/snapshot-0000000004.h5" >"$tmp/i.out" 2>&1 || fail "inspect: $(cat "$tmp/i.out")"
grep -q "^$name200/w " "$tmp/i.out" || fail "parameter $name200/w not in the snapshot"
"$PIPENET" train "$tmp/n200.json" $data --steps 6 --resume "$tmp/snap/snapshot-0000000004.h5" \
    >"$tmp/b.out" 2>&1 || { cat "$tmp/b.out"; fail "resume on one process"; }
grep -q "resuming from .*: step 4" "$tmp/b.out" || fail "resume message: $(cat "$tmp/b.out")"
echo "ok: a name of 200 bytes trains on 2 stages, snapshots and resumes"

# 2. 201 bytes: refused when the model is read, naming the layer
model "$tmp/n201.json" "${name200}x"
"$PIPENET" plan "$tmp/n201.json" >"$tmp/c.out" 2>&1; [ $? -eq 1 ] || fail "201 bytes accepted"
grep -q "n201.json: layers\[0\].name: expected a name of at most 200 bytes, found \"nnnn.*\" (201 bytes)" "$tmp/c.out" ||
    fail "message: $(cat "$tmp/c.out")"
echo "ok: a name of 201 bytes is refused"
# 3. an evaluation reports its progress at the steps' cadence (here: every batch)
"$PIPENET" train "$tmp/n200.json" $data --steps 1 --batch 1000 --log-every 0 >"$tmp/d.out" 2>&1 ||
    { cat "$tmp/d.out"; fail "train --log-every 0"; }
grep -q "^evaluating: 9000/10000 samples  [0-9]* samples/s  ETA " "$tmp/d.out" ||
    fail "no evaluation progress: $(cat "$tmp/d.out")"
echo "ok: evaluation progress"
echo "PASS: limits"

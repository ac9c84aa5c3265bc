#!/bin/sh
# Export and inference end to end on Fashion-MNIST: train 30 steps with snapshots,
# `pipenet export` the snapshot, `pipenet infer` the model (accuracy, predictions
# file with one row per sample), examples/predict on the same model through
# pipenet.h (the same accuracy), and clean errors. Skips (77) without the Debian
# dataset package.
set -u
. "$(dirname "$0")/script_fixture.sh"
TESTS_BUILDDIR=${TESTS_BUILDDIR:-$(dirname "$0")}
PREDICT=$TESTS_BUILDDIR/../examples/predict
"$PIPENET" export --help | grep -q '^usage: pipenet export SNAPSHOT --out' || fail "export --help"
"$PIPENET" infer --help | grep -q '^usage: pipenet infer MODEL.h5 --data' || fail "infer --help"
import_fashion_mnist
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json

if ! "$PIPENET" train --help | grep -q -- --snapshot-dir; then
    echo "SKIP: pipenet train has no --snapshot-dir yet: nothing to export"
    exit 77
fi
"$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" --steps 30 \
    --batch 64 --threads 1 --snapshot-dir "$tmp/snap" >"$tmp/train.out" 2>&1 ||
    { cat "$tmp/train.out"; fail "train exited non-zero"; }
eval_acc=$(grep -o 'eval accuracy [0-9.]*%' "$tmp/train.out" | tail -1 | cut -d' ' -f3)

# export: from the snapshot directory (its newest snapshot)
"$PIPENET" export "$tmp/snap" --out "$tmp/model.h5" >"$tmp/export.out" 2>&1 ||
    { cat "$tmp/export.out"; fail "export exited non-zero"; }
grep -Eq "^exported .*snapshot-0000000030.h5 .*step 30.* to $tmp/model.h5: 6 parameters, 1863690 floats, [0-9]+ bytes" \
    "$tmp/export.out" || fail "export output: $(cat "$tmp/export.out")"
snap_bytes=$(wc -c <"$tmp/snap/snapshot-0000000030.h5")
model_bytes=$(wc -c <"$tmp/model.h5")
[ "$model_bytes" -lt "$snap_bytes" ] || fail "model ($model_bytes B) not smaller than the snapshot ($snap_bytes B)"

# infer: the training run's own evaluation, and a predictions file of N rows
OPENBLAS_NUM_THREADS=1 "$PIPENET" infer "$tmp/model.h5" --data "$tmp/fm/test.h5" \
    --out "$tmp/pred.h5" --batch 100 >"$tmp/infer.out" 2>&1 ||
    { cat "$tmp/infer.out"; fail "infer exited non-zero"; }
grep -q "10000 samples, output 'out' (10 per sample)" "$tmp/infer.out" ||
    fail "infer summary: $(cat "$tmp/infer.out")"
acc=$(grep -o '^accuracy [0-9.]*%' "$tmp/infer.out" | cut -d' ' -f2)
[ -n "$acc" ] || fail "infer printed no accuracy: $(cat "$tmp/infer.out")"
[ "$acc" = "$eval_acc" ] || fail "infer accuracy $acc, training's evaluation $eval_acc"
awk "BEGIN { exit !(${acc%\%} > 50) }" || fail "accuracy $acc after 30 steps"
grep -q "mean loss [0-9.]*" "$tmp/infer.out" || fail "no mean loss: $(cat "$tmp/infer.out")"
grep -q "wrote $tmp/pred.h5: /outputs float32 \[10000, 10\], /predictions int32 \[10000\], /scores float32 \[10000, 10\]" \
    "$tmp/infer.out" || fail "infer --out line: $(cat "$tmp/infer.out")"
"$PIPENET" inspect "$tmp/pred.h5" >"$tmp/inspect.out" 2>&1 || fail "inspect predictions"
grep -Eq '/outputs +float32 +\[10000, 10\]' "$tmp/inspect.out" || fail "outputs: $(cat "$tmp/inspect.out")"
grep -Eq '/predictions +int32 +\[10000\]' "$tmp/inspect.out" || fail "predictions: $(cat "$tmp/inspect.out")"
grep -Eq '/scores +float32 +\[10000, 10\]' "$tmp/inspect.out" || fail "scores: $(cat "$tmp/inspect.out")"
ls "$tmp" | grep -q '\.tmp' && fail "infer left a temporary file"

# a snapshot works as a model file too
"$PIPENET" infer "$tmp/snap/snapshot-0000000030.h5" --data "$tmp/fm/test.h5" >"$tmp/snap.out" 2>&1 ||
    fail "infer on a snapshot: $(cat "$tmp/snap.out")"
grep -q "^accuracy $acc" "$tmp/snap.out" || fail "snapshot accuracy: $(cat "$tmp/snap.out")"

# examples/predict through pipenet.h: the same predictions as infer
if [ -x "$PREDICT" ]; then
    OPENBLAS_NUM_THREADS=1 "$PREDICT" "$tmp/model.h5" "$tmp/fm/test.h5" 0 >"$tmp/predict.out" 2>&1 ||
        { tail -3 "$tmp/predict.out"; fail "examples/predict exited non-zero"; }
    [ "$(grep -c '^sample [0-9]*: class [0-9] (label [0-9])$' "$tmp/predict.out")" -eq 10000 ] ||
        fail "predict printed $(grep -c '^sample' "$tmp/predict.out") sample lines, expected 10000"
    grep -q "on 10000 samples of .*: accuracy $acc" "$tmp/predict.out" ||
        fail "predict accuracy: $(tail -1 "$tmp/predict.out"), infer $acc"
else
    echo "note: $PREDICT not built (make check builds it); skipped"
fi

# errors: exit 2 for misuse, 1 for bad input, the message names the culprit
"$PIPENET" export "$tmp/snap" >"$tmp/e1" 2>&1; [ $? -eq 2 ] || fail "export without --out"
grep -q "pipenet: error: export needs --out" "$tmp/e1" || fail "export --out message: $(cat "$tmp/e1")"
"$PIPENET" export "$tmp/none.h5" --out "$tmp/x.h5" >"$tmp/e2" 2>&1; [ $? -eq 1 ] || fail "missing snapshot"
grep -q "none.h5" "$tmp/e2" || fail "missing snapshot message: $(cat "$tmp/e2")"
[ ! -e "$tmp/x.h5" ] || fail "export wrote a file after an error"
"$PIPENET" export "$tmp/fm/test.h5" --out "$tmp/x.h5" >"$tmp/e3" 2>&1; [ $? -eq 1 ] || fail "dataset exported"
grep -q "test.h5" "$tmp/e3" || fail "dataset as snapshot message: $(cat "$tmp/e3")"
"$PIPENET" infer "$tmp/model.h5" >"$tmp/e4" 2>&1; [ $? -eq 2 ] || fail "infer without --data"
"$PIPENET" infer "$tmp/model.h5" --data "$tmp/fm/test.h5" --output nope >"$tmp/e5" 2>&1
[ $? -eq 1 ] || fail "infer --output nope"
grep -q "nope" "$tmp/e5" || fail "--output message: $(cat "$tmp/e5")"
"$PIPENET" infer "$model" --data "$tmp/fm/test.h5" >"$tmp/e6" 2>&1; [ $? -eq 1 ] || fail "JSON as a model file"
grep -q "fashion_mlp.json" "$tmp/e6" || fail "JSON model message: $(cat "$tmp/e6")"
# as one of 2 ranks (by the launcher's word; MPI sees one), --stages 2 cannot be had
OMPI_COMM_WORLD_SIZE=2 "$PIPENET" infer "$tmp/model.h5" --data "$tmp/fm/test.h5" --stages 2 \
    >"$tmp/e7" 2>&1
[ $? -eq 2 ] || fail "infer --stages 2 in one process"
grep -q "but 1 rank was started" "$tmp/e7" || fail "ranks message: $(cat "$tmp/e7")"
# an output never replaces an input (same file under another name included): a wrong
# command line, exit 2 (tests/test_outputs.sh has the other outputs)
sum_of() { cksum <"$1"; }
before_model=$(sum_of "$tmp/model.h5") before_data=$(sum_of "$tmp/fm/test.h5")
"$PIPENET" infer "$tmp/model.h5" --data "$tmp/fm/test.h5" --out "$tmp/./model.h5" >"$tmp/e8" 2>&1
[ $? -eq 2 ] || fail "infer --out over its model accepted"
grep -q "pipenet: error: --out '$tmp/./model.h5' is the model file" "$tmp/e8" || fail "infer --out message: $(cat "$tmp/e8")"
ln -s "$tmp/fm/test.h5" "$tmp/link.h5"
"$PIPENET" infer "$tmp/model.h5" --data "$tmp/fm/test.h5" --out "$tmp/link.h5" >"$tmp/e9" 2>&1
[ $? -eq 2 ] || fail "infer --out over its data accepted"
grep -q "is the data file" "$tmp/e9" || fail "infer --out data message: $(cat "$tmp/e9")"
"$PIPENET" export "$tmp/model.h5" --out "$tmp/model.h5" >"$tmp/e10" 2>&1
[ $? -eq 2 ] || fail "export --out over its input accepted"
grep -q "is the file exported from" "$tmp/e10" || fail "export --out message: $(cat "$tmp/e10")"
[ "$(sum_of "$tmp/model.h5")" = "$before_model" ] && [ "$(sum_of "$tmp/fm/test.h5")" = "$before_data" ] ||
    fail "an input was changed"
echo "ok: outputs that would replace an input are refused, inputs untouched"
echo "PASS: model"

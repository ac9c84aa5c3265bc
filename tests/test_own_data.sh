#!/bin/sh
# docs/own-data.md's worked example on a small slice: scikit-learn's bundled digits
# (classification) and diabetes (regression) written from numpy in numpy's own types
# (scripts/sklearn_to_h5.py: float64 features, int64 labels, float64 targets [N]),
# trained with the bundled models/digits_mlp.json and models/diabetes_linear.json
# as they are (only the data, the length and the snapshot directory given on the
# command line), exported and run by `pipenet infer`:
#  - each conversion is said once, and training learns (bounds well inside what the
#    slice reaches, next to scikit-learn's baseline on the same split);
#  - the export's /outputs are the network recomputed in numpy from the exported
#    parameters; the classifier's /predictions are their argmax and infer's accuracy
#    theirs against the labels; the regression has no /predictions or /scores and
#    infer's RMSE is numpy's;
#  - a gzip-compressed file trains as the plain one; h5py's lzf, which pipenet's HDF5
#    lacks, is refused saying to write gzip.
# Skips (77) without a python3 that has scikit-learn and h5py (Debian's
# python3-sklearn, python3-h5py).
set -u
. "$(dirname "$0")/script_fixture.sh"
src=$(cd "$(dirname "$0")/.." && pwd)
PY=
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import sklearn, h5py, numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with scikit-learn and h5py"; exit 77; }

# run NAME COMMAND...: COMMAND succeeds; its output in $tmp/NAME.out
run() {
    name=$1; shift
    "$@" >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; fail "$name: $*"; }
}
# once NAME TEXT: $tmp/NAME.out says TEXT on exactly one line
once() {
    n=$(grep -cF -- "$2" "$tmp/$1.out")
    [ "$n" -eq 1 ] || { cat "$tmp/$1.out"; fail "$1: '$2' on $n lines, not 1"; }
}
# last_eval NAME WHAT: the number after WHAT in the last evaluation line of NAME
last_eval() { grep -o "$2 [0-9.]*" "$tmp/$1.out" | tail -1 | cut -d' ' -f"$(($(echo "$2" | wc -w) + 1))"; }
# at_least WHAT GOT BOUND / at_most WHAT GOT BOUND
at_least() { awk -v a="$2" -v b="$3" 'BEGIN { exit !(a + 0 >= b + 0) }' || fail "$1: $2, expected >= $3"; }
at_most() { awk -v a="$2" -v b="$3" 'BEGIN { exit !(a + 0 <= b + 0) }' || fail "$1: $2, expected <= $3"; }
# close WHAT GOT WANT TOLERANCE: GOT is a number within TOLERANCE of WANT
close() {
    awk -v a="$2" -v b="$3" -v t="$4" 'BEGIN { d = a - b; exit !(a != "" && d <= t && -d <= t) }' ||
        fail "$1: '$2', expected $3"
}

# train NAME MODEL DIR EPOCHS: the bundled MODEL on DIR/{train,test}.h5, snapshots in
# $tmp/NAME.snaps, exported to $tmp/NAME.h5 and run on DIR/test.h5 into $tmp/NAME.out.h5
train() {
    run "$1" "$PIPENET" train "$src/models/$2" --data "$3/train.h5" --eval "$3/test.h5" \
        --epochs "$4" --snapshot-dir "$tmp/$1.snaps" --threads 1
    run "$1.export" "$PIPENET" export "$tmp/$1.snaps" --out "$tmp/$1.h5"
    run "$1.infer" "$PIPENET" infer "$tmp/$1.h5" --data "$3/test.h5" --out "$tmp/$1.out.h5"
}

# recompute MODEL DATA OUT: numpy's forward pass of the exported fc layers (relu where
# the config says) against OUT's /outputs; prints "classes ACCURACY" or "rmse RMSE"
recompute() {
    "$PY" - "$@" <<'EOF'
import json, sys
import h5py, numpy as np
model, data, out = sys.argv[1:]
with h5py.File(model, "r") as f:
    config = json.loads(f.attrs["config"])
    params = {name: f["params"][name][:] for name in ("fc1/w", "fc1/b", "out/w", "out/b")
              if name in f["params"]}
with h5py.File(data, "r") as f:
    x = f["features"][:].astype(np.float32)
    y = f["labels"][:] if "labels" in f else f["target"][:]
with h5py.File(out, "r") as f:
    got = f["outputs"][:]
    kept = sorted(f.keys())
h = x
for layer in config["layers"]:
    if layer["type"] != "fc":
        continue
    h = h @ params[layer["name"] + "/w"] + params[layer["name"] + "/b"]
    if layer.get("act") == "relu":
        h = np.maximum(h, 0)
err = float(np.max(np.abs(got - h)) / (1 + np.max(np.abs(h))))
if got.shape != h.shape or err > 1e-5:
    sys.exit("/outputs %s differ from numpy's %s: relative error %g" % (got.shape, h.shape, err))
if "predictions" in kept:
    with h5py.File(out, "r") as f:
        pred = f["predictions"][:]
    if not np.array_equal(pred, np.argmax(got, axis=1)):
        sys.exit("/predictions are not the argmax of /outputs")
    print("classes %.4f" % (100.0 * np.mean(pred == y)))
else:
    if "scores" in kept:
        sys.exit("a regression's output file has /scores")
    print("rmse %.4f" % float(np.sqrt(np.mean((got[:, 0] - y) ** 2))))
EOF
}

# --- digits: 400 samples, 300 to train, 100 to test ---------------------------------
run digits.data "$PY" "$src/scripts/sklearn_to_h5.py" digits --out "$tmp/digits" --limit 400
grep -q "features float64 \[N, 64\], labels int64 \[N\]" "$tmp/digits.data.out" ||
    fail "sklearn_to_h5.py digits: $(cat "$tmp/digits.data.out")"
train digits digits_mlp.json "$tmp/digits" 20
once digits "train.h5: dataset '/features': float64 converted to float32"
once digits "test.h5: dataset '/labels': int64 converted to int32"
accuracy=$(last_eval digits "eval accuracy")
at_least "digits eval accuracy after 20 epochs on 300 samples (%)" "$accuracy" 85
result=$(recompute "$tmp/digits.h5" "$tmp/digits/test.h5" "$tmp/digits.out.h5" 2>&1) || fail "digits: $result"
numpy_accuracy=${result#classes }
[ "$numpy_accuracy" != "$result" ] || fail "digits: no /predictions in the output file"
close "infer's accuracy against numpy's" "$(sed -n 's/^accuracy \([0-9.]*\)%.*/\1/p' "$tmp/digits.infer.out")" \
    "$numpy_accuracy" 0.01
echo "ok: digits slice $accuracy% ($(sed -n 2p "$tmp/digits.data.out")); /outputs are numpy's"

# --- diabetes: 200 samples, 150 to train, 50 to test --------------------------------
run diabetes.data "$PY" "$src/scripts/sklearn_to_h5.py" diabetes --out "$tmp/diabetes" --limit 200
baseline=$(sed -n 's/.*test RMSE \([0-9.]*\).*/\1/p' "$tmp/diabetes.data.out")
[ -n "$baseline" ] || fail "sklearn_to_h5.py diabetes: $(cat "$tmp/diabetes.data.out")"
train diabetes diabetes_linear.json "$tmp/diabetes" 300
once diabetes "test.h5: dataset '/features': float64 converted to float32"
once diabetes "train.h5: dataset '/target': float64 converted to float32"
grep -q "accuracy" "$tmp/diabetes.out" "$tmp/diabetes.infer.out" && fail "an accuracy for the regression"
rmse=$(last_eval diabetes "eval RMSE")
at_most "diabetes eval RMSE after 300 epochs on 150 samples" "$rmse" \
    "$(awk -v b="$baseline" 'BEGIN { print 1.1 * b }')"
result=$(recompute "$tmp/diabetes.h5" "$tmp/diabetes/test.h5" "$tmp/diabetes.out.h5" 2>&1) ||
    fail "diabetes: $result"
numpy_rmse=${result#rmse }
[ "$numpy_rmse" != "$result" ] || fail "diabetes: the output file has /predictions"
close "infer's RMSE against numpy's" "$(sed -n 's/^RMSE \([0-9.]*\) .*/\1/p' "$tmp/diabetes.infer.out")" \
    "$numpy_rmse" 0.01
echo "ok: diabetes slice RMSE $rmse (scikit-learn $baseline); /outputs are numpy's"

# --- what a file may or may not be written with: gzip (chunked) reads as the plain
# file does; h5py's own lzf, which pipenet's HDF5 lacks, is refused saying what to use
"$PY" - "$tmp/diabetes/train.h5" "$tmp/gzip.h5" "$tmp/lzf.h5" <<'EOF2' || fail "rewriting with gzip and lzf"
import sys, h5py
src, gz, lzf = sys.argv[1:]
with h5py.File(src, "r") as f:
    x, y = f["features"][:], f["target"][:]
for path, how in ((gz, "gzip"), (lzf, "lzf")):
    with h5py.File(path, "w") as f:
        f.create_dataset("features", data=x, compression=how)
        f.create_dataset("target", data=y, compression=how)
EOF2
hash_of() { grep -o 'parameter hash after [0-9]* steps: [0-9a-f]*' "$tmp/$1.out"; }
short() { # short NAME FILE: 20 steps of the diabetes model on FILE
    run "$1" "$PIPENET" train "$src/models/diabetes_linear.json" --data "$2" --eval= \
        --steps 20 --snapshot-dir "" --threads 1
}
short diabetes.short "$tmp/diabetes/train.h5"
short gzip.short "$tmp/gzip.h5"
[ -n "$(hash_of diabetes.short)" ] && [ "$(hash_of diabetes.short)" = "$(hash_of gzip.short)" ] ||
    fail "gzip-compressed file trains otherwise: $(hash_of diabetes.short) vs $(hash_of gzip.short)"
"$PIPENET" train "$src/models/diabetes_linear.json" --data "$tmp/lzf.h5" --eval= --steps 2 \
    --snapshot-dir "" >"$tmp/lzf.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -qF "lzf.h5: dataset '/features' is compressed with filter 32000 (lzf), which this HDF5 build lacks: write it uncompressed or with gzip" "$tmp/lzf.out" ||
    { cat "$tmp/lzf.out"; fail "lzf: exit $rc"; }
echo "ok: gzip reads as the plain file does; lzf is refused naming gzip"

#!/bin/sh
# What training reports by the kind of the loss (docs/training.md, docs/formats.md),
# on small models and data written here with tests/h5_fixture (no Debian dataset, no
# h5py): the epoch lines and the metrics file show the RMSE and no accuracy for an
# mse model (no "eval_accuracy" key), the accuracy and no RMSE for a classifier.
set -u
. "$(dirname "$0")/script_fixture.sh"
H5=${TESTS_BUILDDIR:-$(dirname "$0")}/h5_fixture
[ -x "$H5" ] || { echo "SKIP: $H5 not built (make check builds it)"; exit 77; }

# values FILE NAME: dataset NAME of FILE, one value a line
values() { "$H5" print "$1" "$2" 2>"$tmp/h5.err" || { cat "$tmp/h5.err"; fail "read $2 of $1"; }; }
# affine X W B IN OUT [sigmoid]: act(X W + B) row after row, one value a line (X
# [N, IN], W [IN, OUT], B [OUT]: files of one value a line, as values writes them)
affine() {
    awk -v nin="$4" -v nout="$5" -v act="${6:-}" '
        FILENAME == ARGV[1] { x[nx++] = $1; next }
        FILENAME == ARGV[2] { w[nw++] = $1; next }
        { b[nb++] = $1 }
        END {
            for (r = 0; r < nx / nin; r++)
                for (o = 0; o < nout; o++) {
                    z = b[o]
                    for (i = 0; i < nin; i++) z += x[r * nin + i] * w[i * nout + o]
                    if (act == "sigmoid") z = 1 / (1 + exp(-z))
                    printf "%.9g\n", z
                }
        }' "$1" "$2" "$3"
}
# same WHAT GOT WANT: the files hold as many values, each within 1e-5 (relative)
same() {
    [ "$(wc -l <"$2")" -eq "$(wc -l <"$3")" ] && [ -s "$3" ] ||
        fail "$1: $(wc -l <"$2") values, expected $(wc -l <"$3")"
    paste "$2" "$3" | awk -v what="$1" '{
        d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
        if (d > 1e-5 * (1 + m)) { printf "FAIL: %s: value %d is %s, expected %s\n", what, NR, $1, $2; exit 1 }
    }' || exit 1
}
# has FILE DATASET / lacks FILE DATASET: as `pipenet inspect` lists the file
has() { "$PIPENET" inspect "$1" | grep -Eq "^  /$2 " || fail "$1 lacks /$2: $("$PIPENET" inspect "$1")"; }
lacks() { "$PIPENET" inspect "$1" | grep -Eq "^  /$2 " && fail "$1 has /$2"; true; }

# --- a regression: features [N, 3], targets [N, 1] of a linear function -------------
# features ROWS FIRST: ROWS rows of 3 values, the FIRST-th row on
features() {
    awk -v n="$1" -v first="$2" 'BEGIN { for (i = first; i < first + n; i++)
        printf "%.4f %.4f %.4f\n", (i * 7 % 11) / 5 - 1, ((i * 7 + 3) % 11) / 5 - 1, ((i * 5 + 6) % 13) / 6 - 1 }'
}
targets() { awk '{ printf "%.5f\n", 0.5 * $1 - 1.5 * $2 + 2 * $3 + 0.25 + 0.01 * (NR * 13 % 5 - 2) }' "$1"; }
features 48 0 >"$tmp/x_train"
features 16 100 >"$tmp/x_eval"
targets "$tmp/x_train" >"$tmp/y_train"
targets "$tmp/x_eval" >"$tmp/y_eval"
for set in train eval; do
    # shellcheck disable=SC2046
    "$H5" matrix "$tmp/lin_$set.h5" features 3 $(cat "$tmp/x_$set") &&
        "$H5" matrix "$tmp/lin_$set.h5" targets 1 $(cat "$tmp/y_$set") || fail "write lin_$set.h5"
done
cat >"$tmp/lin.json" <<'EOF'
{"name": "lin",
 "inputs": {"x": {"dataset": "features", "size": 3}, "y": {"dataset": "targets", "size": 1}},
 "layers": [
   {"name": "out", "type": "fc", "input": "x", "size": 1},
   {"name": "loss", "type": "mse", "input": ["out", "y"]}],
 "train": {"batch": 8, "steps": 30, "seed": 3, "optimizer": {"type": "sgd", "lr": 0.1}}}
EOF
"$PIPENET" train "$tmp/lin.json" --data "$tmp/lin_train.h5" --eval "$tmp/lin_eval.h5" \
    --eval-every 4 --threads 1 --metrics "$tmp/lin.jsonl" --snapshot-dir "$tmp/lin_snap" \
    >"$tmp/lin_train.out" 2>&1 || { cat "$tmp/lin_train.out"; fail "train the mse model"; }

# the progress lines: an RMSE, never an accuracy
grep -q '^epoch 5: train loss [0-9.]*  eval loss [0-9.]*  eval RMSE [0-9.]*  (' "$tmp/lin_train.out" ||
    { cat "$tmp/lin_train.out"; fail "mse: no epoch line with the eval RMSE"; }
grep -q '^step 4, epoch 1: eval loss [0-9.]*  eval RMSE [0-9.]*$' "$tmp/lin_train.out" ||
    { cat "$tmp/lin_train.out"; fail "mse: no --eval-every line with the eval RMSE"; }
grep -qi 'accuracy' "$tmp/lin_train.out" && { cat "$tmp/lin_train.out"; fail "mse: an accuracy printed"; }
# the metrics: eval_rmse (the root of eval_loss), never eval_accuracy
[ "$(grep -c '"eval_loss"' "$tmp/lin.jsonl")" -eq 10 ] || fail "mse: $(grep -c eval_loss "$tmp/lin.jsonl") eval lines, expected 10"
[ "$(grep -c '"eval_loss": [0-9.e-]*, "eval_rmse": [0-9.e-]*}$' "$tmp/lin.jsonl")" -eq 10 ] ||
    fail "mse: eval lines without eval_rmse: $(grep eval_loss "$tmp/lin.jsonl" | head -2)"
grep -q 'accuracy' "$tmp/lin.jsonl" && fail "mse: the metrics hold an accuracy: $(grep accuracy "$tmp/lin.jsonl" | head -1)"
grep '"eval_rmse"' "$tmp/lin.jsonl" | sed 's/.*"eval_loss": \([^,]*\), "eval_rmse": \([^}]*\)}/\1 \2/' |
    awk '{ d = $2 * $2 - $1; if (d < 0) d = -d; if (d > 1e-12 * (1 + $1)) { print "FAIL: eval_rmse^2 " $2 * $2 " is not eval_loss " $1; exit 1 } }' || exit 1
last_rmse=$(grep '"eval_rmse"' "$tmp/lin.jsonl" | tail -1 | sed 's/.*"eval_rmse": \([^}]*\)}/\1/')
echo "ok: training an mse model reports the eval RMSE (last $last_rmse), no accuracy, in the lines and the metrics"

# --- a classification: features [N, 4], labels [N] in [0, 3) ------------------------
"$H5" dataset "$tmp/cls_train.h5" 60 && "$H5" dataset "$tmp/cls_eval.h5" 21 || fail "write cls data"
cat >"$tmp/cls.json" <<'EOF'
{"name": "cls",
 "inputs": {"x": {"dataset": "features", "size": 4}, "y": {"dataset": "labels", "ids": true}},
 "layers": [
   {"name": "h", "type": "fc", "input": "x", "size": 2, "act": "sigmoid"},
   {"name": "out", "type": "fc", "input": "h", "size": 3},
   {"name": "loss", "type": "softmax_xent", "input": ["out", "y"]}],
 "train": {"batch": 12, "steps": 10, "seed": 5, "optimizer": {"type": "adam", "lr": 0.05}}}
EOF
"$PIPENET" train "$tmp/cls.json" --data "$tmp/cls_train.h5" --eval "$tmp/cls_eval.h5" \
    --threads 1 --metrics "$tmp/cls.jsonl" --snapshot-dir "$tmp/cls_snap" \
    >"$tmp/cls_train.out" 2>&1 || { cat "$tmp/cls_train.out"; fail "train the classifier"; }
grep -q '^epoch 2: train loss [0-9.]*  eval loss [0-9.]*  eval accuracy [0-9.]*%  (' "$tmp/cls_train.out" ||
    { cat "$tmp/cls_train.out"; fail "classifier: no epoch line with the eval accuracy"; }
grep -q 'RMSE' "$tmp/cls_train.out" && fail "classifier: an RMSE printed"
[ "$(grep -c '"eval_loss": [0-9.e-]*, "eval_accuracy": [0-9.e-]*}$' "$tmp/cls.jsonl")" -eq 2 ] ||
    fail "classifier: eval lines: $(grep eval_loss "$tmp/cls.jsonl")"
grep -q 'rmse' "$tmp/cls.jsonl" && fail "classifier: the metrics hold an RMSE"
echo "ok: training a classifier reports the eval accuracy, no RMSE"

echo "PASS: infer outputs"

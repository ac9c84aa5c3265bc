#!/bin/sh
# What `pipenet infer` writes and what training reports, by the kind of the loss
# (docs/inference.md, docs/formats.md), on small models and data written here with
# tests/h5_fixture (no Debian dataset, no h5py, no h5dump):
#  - an mse model (linear regression on targets [N, 1]): /outputs are x w + b,
#    computed from the exported w and b, with no /predictions or /scores; infer prints
#    the RMSE of those outputs against the targets, the training's last eval RMSE,
#    and so does examples/predict through pipenet.h; without the targets, no loss;
#  - a classification model (fc with a sigmoid, fc, softmax_xent): /outputs are the
#    logits (the layer feeding the loss), recomputed the same way, /scores their
#    softmax and /predictions their argmax;
#  - --output LAYER: that layer's values as they are, no softmax, no predictions;
#  - the epoch lines and the metrics file show the RMSE and no accuracy for the mse
#    model (no "eval_accuracy" key), the accuracy and no RMSE for the classifier.
set -u
. "$(dirname "$0")/script_fixture.sh"
need_h5_fixture

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

# --- infer on the exported models ------------------------------------------------
"$PIPENET" export "$tmp/lin_snap" --out "$tmp/lin.h5" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "export lin"; }
"$PIPENET" infer "$tmp/lin.h5" --data "$tmp/lin_eval.h5" --out "$tmp/lin_pred.h5" --batch 5 \
    >"$tmp/lin_infer.out" 2>&1 || { cat "$tmp/lin_infer.out"; fail "infer lin"; }
grep -q "^wrote $tmp/lin_pred.h5: /outputs float32 \[16, 1\] (no /predictions or /scores: 'out' is the prediction of loss 'loss' (mse)" \
    "$tmp/lin_infer.out" || fail "mse: infer --out line: $(cat "$tmp/lin_infer.out")"
grep -qi 'accuracy' "$tmp/lin_infer.out" && fail "mse: infer printed an accuracy: $(cat "$tmp/lin_infer.out")"
has "$tmp/lin_pred.h5" outputs
lacks "$tmp/lin_pred.h5" predictions
lacks "$tmp/lin_pred.h5" scores
values "$tmp/lin.h5" params/out/w >"$tmp/lin_w"
values "$tmp/lin.h5" params/out/b >"$tmp/lin_b"
tr ' ' '\n' <"$tmp/x_eval" | grep . >"$tmp/x_eval_1"
affine "$tmp/x_eval_1" "$tmp/lin_w" "$tmp/lin_b" 3 1 >"$tmp/lin_want"
values "$tmp/lin_pred.h5" outputs >"$tmp/lin_got"
same "mse: /outputs against x w + b" "$tmp/lin_got" "$tmp/lin_want"
# the RMSE printed: of these outputs against the targets, and the training's last
rmse=$(paste "$tmp/lin_got" "$tmp/y_eval" | awk '{ s += ($1 - $2) ^ 2 } END { printf "%.4f", sqrt(s / NR) }')
grep -q "^RMSE $rmse (16 rows), mean loss [0-9.]*$" "$tmp/lin_infer.out" ||
    fail "mse: infer's RMSE line, expected RMSE $rmse: $(cat "$tmp/lin_infer.out")"
[ "$(printf '%.4f' "$last_rmse")" = "$rmse" ] || fail "mse: infer's RMSE $rmse, the training's last $last_rmse"
# examples/predict through pipenet.h: the same values and RMSE
PREDICT=${TESTS_BUILDDIR:-$(dirname "$0")}/../examples/predict
if [ -x "$PREDICT" ]; then
    "$PREDICT" "$tmp/lin.h5" "$tmp/lin_eval.h5" 0 >"$tmp/predict.out" 2>&1 ||
        { cat "$tmp/predict.out"; fail "examples/predict on the mse model"; }
    grep -q "^lin on 16 samples of $tmp/lin_eval.h5: RMSE $rmse, mean loss" "$tmp/predict.out" ||
        fail "predict: no RMSE $rmse: $(cat "$tmp/predict.out")"
    sed -n 's/^sample [0-9]*: \([^ ]*\)$/\1/p' "$tmp/predict.out" >"$tmp/predict_got"
    same "predict: the values" "$tmp/predict_got" "$tmp/lin_want"
    grep -q "class" "$tmp/predict.out" && fail "predict: classes of an mse model: $(head -2 "$tmp/predict.out")"
    echo "ok: examples/predict prints the mse model's values and RMSE"
else
    echo "note: $PREDICT not built (make check builds it); skipped"
fi
# without the targets: the outputs, and no loss
"$H5" matrix "$tmp/lin_x.h5" features 3 $(cat "$tmp/x_eval") || fail "write lin_x.h5"
expect 0 "^no loss: $tmp/lin_x.h5 has no dataset 'targets' for input 'y'" \
    "$PIPENET" infer "$tmp/lin.h5" --data "$tmp/lin_x.h5" --out "$tmp/lin_x_pred.h5"
values "$tmp/lin_x_pred.h5" outputs >"$tmp/lin_x_got"
same "mse without targets: /outputs" "$tmp/lin_x_got" "$tmp/lin_want"
echo "ok: infer on an mse model writes its raw outputs (x w + b), no predictions, and the RMSE"

"$PIPENET" export "$tmp/cls_snap" --out "$tmp/cls.h5" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "export cls"; }
"$PIPENET" infer "$tmp/cls.h5" --data "$tmp/cls_eval.h5" --out "$tmp/cls_pred.h5" --batch 8 \
    >"$tmp/cls_infer.out" 2>&1 || { cat "$tmp/cls_infer.out"; fail "infer cls"; }
grep -q "^wrote $tmp/cls_pred.h5: /outputs float32 \[21, 3\], /predictions int32 \[21\], /scores float32 \[21, 3\]$" \
    "$tmp/cls_infer.out" || fail "classifier: infer --out line: $(cat "$tmp/cls_infer.out")"
grep -q '^accuracy [0-9.]*% ([0-9]* of 21), mean loss [0-9.]*$' "$tmp/cls_infer.out" ||
    fail "classifier: infer's accuracy line: $(cat "$tmp/cls_infer.out")"
values "$tmp/cls_eval.h5" features >"$tmp/cls_x"
for p in h/w h/b out/w out/b; do values "$tmp/cls.h5" "params/$p" >"$tmp/cls_$(echo $p | tr / _)"; done
affine "$tmp/cls_x" "$tmp/cls_h_w" "$tmp/cls_h_b" 4 2 sigmoid >"$tmp/cls_h_want"
affine "$tmp/cls_h_want" "$tmp/cls_out_w" "$tmp/cls_out_b" 2 3 >"$tmp/cls_want"
values "$tmp/cls_pred.h5" outputs >"$tmp/cls_got"
same "classifier: /outputs against the logits" "$tmp/cls_got" "$tmp/cls_want"
# /scores: the softmax of each row of /outputs; /predictions: its largest (the first)
awk '{ v[n++] = $1 } END { for (r = 0; r < n / 3; r++) { m = v[3 * r]; s = 0
        for (j = 1; j < 3; j++) if (v[3 * r + j] > m) m = v[3 * r + j]
        for (j = 0; j < 3; j++) s += exp(v[3 * r + j] - m)
        for (j = 0; j < 3; j++) printf "%.9g\n", exp(v[3 * r + j] - m) / s } }' \
    "$tmp/cls_got" >"$tmp/cls_scores_want"
awk '{ v[n++] = $1 } END { for (r = 0; r < n / 3; r++) { b = 0
        for (j = 1; j < 3; j++) if (v[3 * r + j] > v[3 * r + b]) b = j
        print b } }' "$tmp/cls_got" >"$tmp/cls_pred_want"
values "$tmp/cls_pred.h5" scores >"$tmp/cls_scores_got"
same "classifier: /scores against the softmax of /outputs" "$tmp/cls_scores_got" "$tmp/cls_scores_want"
values "$tmp/cls_pred.h5" predictions >"$tmp/cls_pred_got"
cmp -s "$tmp/cls_pred_got" "$tmp/cls_pred_want" || fail "classifier: /predictions are not the argmax of /outputs"
echo "ok: infer on a classifier writes the logits, their softmax and their argmax"

# --- --output LAYER: the values as the layer computes them ---------------------------
expect 0 "^wrote $tmp/h_pred.h5: /outputs float32 \[21, 2\] (no /predictions or /scores: 'h' is no classification loss's logits)" \
    "$PIPENET" infer "$tmp/cls.h5" --data "$tmp/cls_eval.h5" --output h --out "$tmp/h_pred.h5"
lacks "$tmp/h_pred.h5" predictions
lacks "$tmp/h_pred.h5" scores
values "$tmp/h_pred.h5" outputs >"$tmp/h_got"
same "--output h: /outputs against sigmoid(x w + b)" "$tmp/h_got" "$tmp/cls_h_want"
# naming the default output gives the default's file; the loss layer's values too
"$PIPENET" infer "$tmp/cls.h5" --data "$tmp/cls_eval.h5" --output out --out "$tmp/out_pred.h5" \
    >/dev/null 2>&1 || fail "--output out"
expect 0 "0 differ (exact" "$PIPENET" inspect "$tmp/out_pred.h5" --compare "$tmp/cls_pred.h5"
expect 0 "/outputs float32 \[16, 1\] (no /predictions" \
    "$PIPENET" infer "$tmp/lin.h5" --data "$tmp/lin_eval.h5" --output loss --out "$tmp/loss_pred.h5"
paste "$tmp/lin_got" "$tmp/y_eval" | awk '{ printf "%.9g\n", ($1 - $2) ^ 2 }' >"$tmp/loss_want"
values "$tmp/loss_pred.h5" outputs >"$tmp/loss_got"
same "--output loss: /outputs against the squared errors" "$tmp/loss_got" "$tmp/loss_want"
echo "ok: --output LAYER writes the layer's raw values, predictions only for a classification's logits"
echo "PASS: infer outputs"

#!/bin/sh
# A click-through model end to end (docs/layers.md, feature crosses), on a planted
# dataset written with tests/h5_fixture (ctr_fixture.sh: 3 fields of 4 values, a
# click where the first field's value is high or the last two agree, a few labels
# flipped) and ctr_fixture.sh's model: fm over the field embeddings added to a deep
# part (flatten, stacked cross layers, inner_product, fc), sigmoid_xent.
#  - training: the loss falls, the eval lines and the metrics file give the AUC
#    (eval_auc, never an accuracy or an RMSE), and the last AUC is well above 0.5;
#  - under --deterministic, the same parameter hash and eval AUC on 1 process, on 2
#    stages and on 2 stages x 2 replicas (micro-batches of 8 samples everywhere);
#  - infer: /outputs are the logits, /scores their sigmoid, /predictions 1 where that
#    is >= 0.5, and the summary line's AUC is that of /outputs against the clicks
#    (counted pair by pair here) and the training's last; examples/predict prints
#    the same probabilities and AUC through pipenet.h;
#  - a click that is not 0 or 1 is refused naming the file and the sample.
set -u
. "$(dirname "$0")/script_fixture.sh"
. "$(dirname "$0")/ctr_fixture.sh"
values() { "$H5" print "$1" "$2" 2>"$tmp/h5.err" || { cat "$tmp/h5.err"; fail "read $2 of $1"; }; }

ctr_set train 256 0
ctr_set eval 96 1000
ctr_model "$tmp/ctr.json" 64
"$PIPENET" train "$tmp/ctr.json" --data "$tmp/train.h5" --eval "$tmp/eval.h5" --threads 1 \
    --metrics "$tmp/ctr.jsonl" --snapshot-dir "$tmp/snap" >"$tmp/train.out" 2>&1 ||
    { cat "$tmp/train.out"; fail "train the click-through model"; }
grep -q '^epoch 8: train loss [0-9.]*  eval loss [0-9.]*  eval AUC [0-9.]*  (' "$tmp/train.out" ||
    { cat "$tmp/train.out"; fail "no epoch line with the eval AUC"; }
grep -Eq 'accuracy|RMSE' "$tmp/train.out" && { cat "$tmp/train.out"; fail "an accuracy or an RMSE printed"; }
[ "$(grep -c '"eval_loss": [0-9.e-]*, "eval_auc": [0-9.e-]*}$' "$tmp/ctr.jsonl")" -eq 8 ] ||
    fail "eval lines without eval_auc: $(grep eval_loss "$tmp/ctr.jsonl" | head -2)"
grep -Eq 'eval_accuracy|eval_rmse' "$tmp/ctr.jsonl" && fail "the metrics hold an accuracy or an RMSE"
first=$(sed -n 's/^epoch 1: train loss \([0-9.]*\) .*/\1/p' "$tmp/train.out")
last=$(sed -n 's/^epoch 8: train loss \([0-9.]*\) .*/\1/p' "$tmp/train.out")
auc=$(grep '"eval_auc"' "$tmp/ctr.jsonl" | tail -1 | sed 's/.*"eval_auc": \([^}]*\)}/\1/')
echo "train loss epoch 1 $first, epoch 8 $last; last eval AUC $auc"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' || fail "the loss did not fall: $first -> $last"
awk -v a="$auc" 'BEGIN { exit !(a > 0.8) }' || fail "eval AUC $auc, expected well above 0.5"
echo "ok: a click-through model trains, its loss falls and its eval AUC is $auc"

# --deterministic: one parameter hash on 1 process, on 2 stages, and on 2 stages x 2
# replicas (micro-batches of 8 everywhere), and one eval AUC: the histograms of
# micro-batches, stages and replicas add up to the one process's
for layout in "one 1 --stages 1 --micro-batches 4" "two 2 --stages 2 --micro-batches 4" \
    "four 4 --stages 2 --micro-batches 2"; do
    # shellcheck disable=SC2086
    set -- $layout
    name=$1 np=$2; shift 2
    mpirun --oversubscribe -np "$np" "$PIPENET" train "$tmp/ctr.json" --data "$tmp/train.h5" \
        --eval "$tmp/eval.h5" --steps 6 --eval-every 3 --threads 1 --deterministic "$@" \
        >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; fail "$name: --deterministic"; }
done
summary() { # the hash and the eval lines of run $1
    sed -n 's/^parameter hash after 6 steps: //p' "$tmp/$1.out"
    grep -o 'eval loss [0-9.]*  eval AUC [0-9.]*' "$tmp/$1.out"
}
summary one >"$tmp/one.sum"
[ "$(grep -c AUC "$tmp/one.sum")" -eq 2 ] || { cat "$tmp/one.out"; fail "one: not 2 eval lines"; }
for name in two four; do
    summary $name | cmp -s - "$tmp/one.sum" ||
        { summary $name; cat "$tmp/one.sum"; fail "$name differs from one process"; }
done
echo "ok: --deterministic gives one hash and eval AUC on 1 process, 2 stages, 2 x 2: $(tr '\n' ' ' <"$tmp/one.sum")"

# infer: logits, their sigmoid, predictions at 0.5, and the AUC of the logits
"$PIPENET" export "$tmp/snap" --out "$tmp/ctr.h5" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "export"; }
"$PIPENET" infer "$tmp/ctr.h5" --data "$tmp/eval.h5" --out "$tmp/pred.h5" --batch 10 \
    >"$tmp/infer.out" 2>&1 || { cat "$tmp/infer.out"; fail "infer"; }
grep -q "^wrote $tmp/pred.h5: /outputs float32 \[96, 1\], /predictions int32 \[96\], /scores float32 \[96, 1\]$" \
    "$tmp/infer.out" || fail "infer --out line: $(cat "$tmp/infer.out")"
values "$tmp/pred.h5" outputs >"$tmp/z"
values "$tmp/pred.h5" scores >"$tmp/p"
values "$tmp/pred.h5" predictions >"$tmp/yhat"
awk '{ print $4 }' "$tmp/eval.txt" >"$tmp/y"
paste "$tmp/z" "$tmp/p" "$tmp/yhat" | awk '{
    p = 1 / (1 + exp(-$1)); d = p - $2; if (d < 0) d = -d
    if (d > 1e-6) { printf "FAIL: row %d: score %s, sigmoid of %s is %.9g\n", NR, $2, $1, p; exit 1 }
    if ($3 != ($2 >= 0.5)) { printf "FAIL: row %d: prediction %s for score %s\n", NR, $3, $2; exit 1 } }' ||
    exit 1
want=$(pair_auc "$tmp/z" "$tmp/y")
grep -q "^AUC $want (96 rows), log-loss [0-9.]*$" "$tmp/infer.out" ||
    fail "infer's AUC line, expected AUC $want: $(cat "$tmp/infer.out")"
[ "$(printf '%.4f' "$auc")" = "$want" ] || fail "infer's AUC $want, the training's last $auc"
echo "ok: infer writes logits, sigmoid scores, predictions at 0.5, and AUC $want"
# examples/predict through pipenet.h (pn_model_classifies 2, pn_model_auc): the same
PREDICT=${TESTS_BUILDDIR:-$(dirname "$0")}/../examples/predict
if [ -x "$PREDICT" ]; then
    "$PREDICT" "$tmp/ctr.h5" "$tmp/eval.h5" 0 >"$tmp/predict.out" 2>&1 ||
        { cat "$tmp/predict.out"; fail "examples/predict on the click-through model"; }
    grep -q "^ctr on 96 samples of $tmp/eval.h5: AUC $want, log-loss" "$tmp/predict.out" ||
        fail "predict: no AUC $want: $(tail -1 "$tmp/predict.out")"
    sed -n 's/^sample [0-9]*: p(1) \([0-9.]*\)$/\1/p' "$tmp/predict.out" >"$tmp/predict_p"
    paste "$tmp/predict_p" "$tmp/p" | awk '{ d = $1 - $2; if (d < 0) d = -d
        if (d > 2e-6) { printf "FAIL: predict: p(1) %s of sample %d, /scores %s\n", $1, NR - 1, $2; exit 1 } }
        END { if (NR != 96) { print "FAIL: predict printed " NR " samples"; exit 1 } }' || exit 1
    echo "ok: examples/predict prints the probabilities and AUC $want"
else
    echo "note: $PREDICT not built (make check builds it); skipped"
fi

# a click of 2: refused, naming the file and the sample
"$H5" typed "$tmp/bad.h5" fields int32 4x3 0 4 8 && "$H5" typed "$tmp/bad.h5" clicks int32 4 0 1 2 0 ||
    fail "write bad.h5"
expect 1 "bad.h5.*sample 2" "$PIPENET" train "$tmp/ctr.json" --data "$tmp/bad.h5" --eval= --steps 1 \
    --batch 4 --threads 1
echo "ok: a click of 2 is refused: $(grep -m1 error "$tmp/out")"

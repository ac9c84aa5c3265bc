#!/bin/sh
# The bundled click-through models (models/deepfm.json, wide_deep.json, dcn.json and
# the logistic-regression baseline ctr_logreg.json) as they are, on a small
# synthetic-ctr dataset: the models' 26 fields, but 20 ids each (columns below the
# models' 26000) and a planted logit of scale 3, so that 40,000 samples are enough
# for the pairs to be learned (with the models' 1000 ids, 20,000 samples teach
# DeepFM less than a logistic regression); 5,000 test samples:
#  - each trains (--batch 256, the models' own epochs, optimizer, schedule, dropout
#    and init) and its last eval AUC clears a bound well inside what it reached when
#    measured (LR 0.8083, DeepFM 0.8615, Wide & Deep 0.8594, DCN 0.8535; planted
#    0.9133);
#  - DeepFM's AUC beats the logistic regression's by a margin;
#  - DeepFM's snapshot exports and `pipenet infer` gives the test file's AUC.
set -u
. "$(dirname "$0")/script_fixture.sh"
models=$(cd "$(dirname "$0")/../models" && pwd)

"$PIPENET" import synthetic-ctr --out "$tmp/ctr" --samples 40000 --test-samples 5000 \
    --vocab 20 --logit-scale 3 >"$tmp/import.out" 2>&1 || { cat "$tmp/import.out"; fail "import synthetic-ctr"; }
planted=$(sed -n 's/^planted model on test.h5: log-loss [0-9.]*, AUC \([0-9.]*\),.*/\1/p' "$tmp/import.out")
[ -n "$planted" ] || { cat "$tmp/import.out"; fail "no planted AUC"; }

# auc MODEL: train it, print its last eval AUC
auc() {
    "$PIPENET" train "$models/$1.json" --data "$tmp/ctr/train.h5" --eval "$tmp/ctr/test.h5" \
        --batch 256 --snapshot-dir "$tmp/$1" \
        >"$tmp/$1.out" 2>&1 || { cat "$tmp/$1.out" >&2; echo "FAIL: train $1" >&2; return 1; }
    sed -n 's/^epoch [0-9]*: train loss [0-9.]*  eval loss [0-9.]*  eval AUC \([0-9.]*\) .*/\1/p' "$tmp/$1.out" | tail -n 1
}
# check MODEL BOUND: its AUC is above BOUND
check() {
    a=$(auc "$1") || exit 1
    [ -n "$a" ] || { cat "$tmp/$1.out"; fail "$1: no eval AUC"; }
    awk -v a="$a" -v b="$2" 'BEGIN { exit !(a > b) }' || { cat "$tmp/$1.out"; fail "$1: eval AUC $a, not above $2"; }
    echo "ok: $1 eval AUC $a > $2 (planted $planted)"
    eval "auc_$1=$a"
}
check ctr_logreg 0.79
check deepfm 0.845
check wide_deep 0.845
check dcn 0.84
# shellcheck disable=SC2154
awk -v d="$auc_deepfm" -v l="$auc_ctr_logreg" 'BEGIN { exit !(d > l + 0.03) }' ||
    fail "DeepFM's AUC $auc_deepfm is not 0.03 above the logistic regression's $auc_ctr_logreg"
echo "ok: DeepFM $auc_deepfm beats the logistic regression $auc_ctr_logreg by more than 0.03"

"$PIPENET" export "$tmp/deepfm" --out "$tmp/deepfm.h5" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "export"; }
"$PIPENET" infer "$tmp/deepfm.h5" --data "$tmp/ctr/test.h5" --out "$tmp/pred.h5" \
    >"$tmp/infer.out" 2>&1 || { cat "$tmp/infer.out"; fail "infer"; }
grep -q "^wrote $tmp/pred.h5: /outputs float32 \[5000, 1\], /predictions int32 \[5000\], /scores float32 \[5000, 1\]$" \
    "$tmp/infer.out" || fail "infer --out line: $(cat "$tmp/infer.out")"
got=$(sed -n 's/^AUC \([0-9.]*\) (5000 rows), log-loss [0-9.]*$/\1/p' "$tmp/infer.out")
[ "$got" = "$(printf '%.4f' "$auc_deepfm")" ] || fail "infer's AUC '$got', the training's last $auc_deepfm"
echo "ok: export and infer: AUC $got on the 5000 test samples"

#!/bin/sh
# The activation memory planner (net/arg_plan.h) on every bundled model
# (models/*.json): each trains 3 steps under --deterministic with micro-batches of
# 8 samples on one process and on 2 stages under gpipe (micro-batches in flight),
# with the planner (the default) and with --no-share-memory: one parameter hash.
# char_gpt also under 1f1b, interleaved (2 virtual stages) and --recompute, each on
# and off; its run's activation memory line shows the planned arguments at most
# 60% of the unplanned, and `pipenet plan` says so before a run. gpt2_small
# (163M parameters) is planned only. fashion_mlp skips without the Debian dataset
# package; the other models train on data made here.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/lm_fixture.sh"
need_h5_fixture
models=$here/../models
export OPENBLAS_NUM_THREADS=1

# data: text windows, records, click-through rows, dense features made up here
import_times_table 3000 64
awk '{ print } NR % 3 == 0 { print "%" }' "$tmp/text.txt" >"$tmp/records.txt"
"$PIPENET" import text "$tmp/records.txt" --out "$tmp/rec" --seq 64 --records % >/dev/null ||
    fail "import text --records"
"$PIPENET" import synthetic-ctr --out "$tmp/ctr" --samples 2048 --test-samples 64 >/dev/null ||
    fail "import synthetic-ctr"
# NAME COLS LABELS...: dense features (67 values cycled, so rows differ) and labels
dense() {
    # shellcheck disable=SC2046
    "$H5" typed "$tmp/$1.h5" features float32 "512x$2" $(awk 'BEGIN { for (i = 0; i < 67; i++)
        printf "%.4f ", ((i * 37) % 67) / 67 - 0.5 }') || fail "write $1.h5"
    name=$3 type=$4; shift 4
    "$H5" typed "$tmp/$name.h5" "$type" "$@" || fail "write $name.h5"
}
dense digits 64 digits labels int32 512 3 1 4 1 5 9 2 6 5 3 5 8 9 7
dense diabetes 10 diabetes target float32 512x1 0.5 -1.25 2 0.75 -0.5 1.5 0.25
SRC=/usr/share/datasets/fashion-mnist
if [ -d "$SRC" ]; then
    "$PIPENET" import fashion-mnist --src "$SRC" --out "$tmp/fm" >/dev/null || fail "import fashion-mnist"
fi

# data_of MODEL: its training file here, or nothing
data_of() {
    case $1 in
    char_gpt | char_gpt_tied | char_lstm) echo "$tmp/lm/train.h5" ;;
    char_lstm_records) echo "$tmp/rec/train.h5" ;;
    ctr_logreg | dcn | deepfm | wide_deep) echo "$tmp/ctr/train.h5" ;;
    digits_mlp) echo "$tmp/digits.h5" ;;
    diabetes_linear) echo "$tmp/diabetes.h5" ;;
    fashion_mlp) [ -d "$tmp/fm" ] && echo "$tmp/fm/train.h5" ;;
    esac
}

# go NAME MODEL RANKS ARGS...: 3 steps, the output in $tmp/NAME; prints the hash
go() {
    name=$1 model=$2 np=$3; shift 3
    timeout -s KILL 600 mpirun --oversubscribe -np "$np" "$PIPENET" train "$tmp/$model.json" \
        --data "$(data_of "$model")" --eval "" --steps 3 --batch 64 --micro-batches 8 \
        --threads 1 --deterministic --log-every 1000 --snapshot-dir "" "$@" >"$tmp/$name" 2>&1 ||
        { cat "$tmp/$name"; fail "$name: $model $*"; }
    h=$(sed -n 's/^parameter hash after 3 steps: //p' "$tmp/$name")
    [ -n "$h" ] || { cat "$tmp/$name"; fail "$name printed no parameter hash"; }
    echo "$h"
}

n=0
for path in "$models"/*.json; do
    model=$(basename "$path" .json)
    [ "$model" = gpt2_small ] && continue
    if [ -z "$(data_of "$model")" ]; then
        echo "skip $model: no data ($SRC not installed)"
        continue
    fi
    # the model with a constant learning rate (warm-ups outlast 3 steps)
    sed 's/"schedule": {[^}]*}/"schedule": {"type": "constant"}/' "$path" >"$tmp/$model.json"
    layouts="one 1 --stages 1|pipe 2 --stages 2 --schedule gpipe"
    [ "$model" = char_gpt ] && layouts="$layouts|1f1b 2 --stages 2 --schedule 1f1b|inter 2 --stages 2 --schedule interleaved --virtual-stages 2|recompute 2 --stages 2 --schedule gpipe --recompute"
    first= line="$model:"
    old_ifs=$IFS
    IFS='|'
    for layout in $layouts; do
        IFS=$old_ifs
        # shellcheck disable=SC2086
        set -- $layout
        tag=$1 np=$2; shift 2
        for share in on off; do
            flag=
            [ $share = off ] && flag=--no-share-memory
            # shellcheck disable=SC2086
            h=$(go "${model}_${tag}_$share" "$model" "$np" "$@" $flag) || { echo "$h"; exit 1; }
            [ -n "$first" ] || first=$h
            [ "$h" = "$first" ] || fail "$model $tag, sharing $share: hash $h, not $first"
            line="$line $tag/$share $h"
            n=$((n + 1))
        done
        IFS='|'
    done
    IFS=$old_ifs
    echo "$line"
done
[ "$n" -ge 22 ] || fail "only $n runs"

# the measured line: "(1 network X + ...": planned at most 60% of unplanned
arg_mib() { sed -n 's/^activation memory: stage 0 [0-9.]* MiB (1 network \([0-9.]*\) .*/\1/p' "$1"; }
on=$(arg_mib "$tmp/char_gpt_one_on") off=$(arg_mib "$tmp/char_gpt_one_off")
[ -n "$on" ] && [ -n "$off" ] || { cat "$tmp/char_gpt_one_on"; fail "no activation memory line"; }
echo "char_gpt, one process: arguments $off MiB unplanned, $on MiB planned"
awk -v a="$on" -v b="$off" 'BEGIN { exit !(a <= 0.6 * b) }' || fail "the planner saved too little"

# plan: the same figures before a run (one network of 64 samples, as the run's,
# whose ids the plan does not count), and gpt2_small's
for model in char_gpt gpt2_small; do
    "$PIPENET" plan "$models/$model.json" --batch 64 --micro-batches 1 >"$tmp/plan_$model" 2>&1 ||
        { cat "$tmp/plan_$model"; fail "plan $model"; }
    row=$(grep "^  stage 0: .* MiB each in its own block, .* MiB shared" "$tmp/plan_$model") ||
        { cat "$tmp/plan_$model"; fail "plan $model: no planner line"; }
    echo "plan $model:$row"
    echo "$row" | awk '{ own = $3; shared = $10; exit !(shared > 0 && shared <= 0.7 * own) }' ||
        fail "plan $model: the planned arguments are not smaller"
done
grep "^  stage 0: " "$tmp/plan_char_gpt" | awk -v on="$on" -v off="$off" '{
    exit !($3 <= off && $3 >= 0.99 * off && $10 <= on && $10 >= 0.99 * on) }' ||
    fail "plan's char_gpt figures are not the run's ($off, $on MiB)"
echo "PASS: $n runs, planned and unplanned alike; char_gpt $off -> $on MiB"

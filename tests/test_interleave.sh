#!/bin/sh
# The interleaved schedule's surface: `pipenet plan --schedule interleaved` shows the
# chunks (chunk c on stage c mod P), the interleaved bubble (P-1)/(VM+P-1) beside
# 1f1b's and each stage's memory; clean errors for virtual stages without the
# interleaved schedule, too few layers for P x V chunks, one stage, micro-batches not
# a multiple of P; and the "schedule" and "virtual_stages" keys of "train" run 2
# stages x 2 virtual stages (Fashion-MNIST, skipped without it). Its numbers against
# one process: test_layouts.c and test_resume.sh.
set -u
. "$(dirname "$0")/script_fixture.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json

# plan: 4 chunks of fashion_mlp's 4 layers, 2 per stage, M = 8
"$PIPENET" plan "$model" --stages 2 --schedule interleaved --virtual-stages 2 --micro-batches 8 \
    >"$tmp/p" 2>&1 || { cat "$tmp/p"; fail "plan interleaved exited non-zero"; }
cat "$tmp/p"
head -1 "$tmp/p" | grep -q "^fashion_mlp: P=2 stages x V=2 virtual stages (4 chunks) x D=1 replica (2 ranks)" ||
    fail "header: $(head -1 "$tmp/p")"
# (P-1)/(VM+P-1) = 1/17, against 1f1b's 1/9
head -1 "$tmp/p" | grep -q "schedule interleaved, predicted bubble 5.9% (1f1b: 11.1%)" ||
    fail "bubble 1/17 (1f1b 1/9) not in the header: $(head -1 "$tmp/p")"
[ "$(grep -c '^[0-9] ' "$tmp/p")" -eq 6 ] || fail "expected 4 chunk rows and 2 stage rows"
for c in 0 1 2 3; do
    grep -Eq "^$c +$((c % 2)) +[a-z]" "$tmp/p" || fail "chunk $c is not on stage $((c % 2))"
done
grep -Eq '^0 +0, 2 ' "$tmp/p" && grep -Eq '^1 +1, 3 ' "$tmp/p" || fail "stage rows do not list chunks 0, 2 and 1, 3"
"$PIPENET" plan "$model" --stages 2 --schedule interleaved --micro-batches 8 --json >"$tmp/j" ||
    fail "plan --json exited non-zero"
grep -q '"virtual_stages": 2' "$tmp/j" || fail "--json lacks virtual_stages 2 (the default)"
"$PIPENET" plan --help | grep -q -- "--virtual-stages V" || fail "plan --help lacks --virtual-stages"
"$PIPENET" train --help | grep -q -- "--virtual-stages V" || fail "train --help lacks --virtual-stages"

# errors: 2 for misuse, 1 for a layout that cannot work, naming why
expect 2 "pipenet: error: --virtual-stages needs --schedule interleaved" \
    "$PIPENET" plan "$model" --stages 2 --schedule 1f1b --virtual-stages 2
expect 1 "2 virtual stages need the interleaved schedule" \
    "$PIPENET" plan "$model" --stages 2 --virtual-stages 2
# plan takes the schedule and V from the model's train section, as train does
sed 's/"train": {/"train": {"schedule": "interleaved", "virtual_stages": 2, /' "$model" \
    >"$tmp/il_keys.json"
"$PIPENET" plan "$tmp/il_keys.json" --stages 2 --micro-batches 8 >"$tmp/pk" 2>&1 ||
    { cat "$tmp/pk"; fail "plan of a model whose train section says interleaved"; }
head -1 "$tmp/pk" | grep -q "V=2 virtual stages .* schedule interleaved" ||
    fail "plan ignored the model's schedule keys: $(head -1 "$tmp/pk")"
expect 1 "4 layers cannot fill 2 stages x 3 virtual stages = 6 chunks" \
    "$PIPENET" plan "$model" --stages 2 --schedule interleaved --virtual-stages 3
expect 1 "interleaved P=1 V=2 M=4: needs at least 2 stages" \
    "$PIPENET" plan "$model" --schedule interleaved --batch 64
expect 1 "P=2 V=2 M=4: needs at least 2 virtual stages\|P=2 V=1 M=4: needs at least 2 virtual stages" \
    "$PIPENET" plan "$model" --stages 2 --schedule interleaved --virtual-stages 1 --micro-batches 4
expect 2 "pipenet: error: --virtual-stages: only with --schedule interleaved (got --schedule 1f1b)" \
    "$PIPENET" train "$model" --schedule 1f1b --virtual-stages 2
# (that the message lists every schedule is test_choices', which enumerates the table)
expect 2 "pipenet: error: --schedule: expected .*, got 'zigzag'" "$PIPENET" train "$model" --schedule zigzag
expect 1 "2 virtual stages need the interleaved schedule" \
    "$PIPENET" train "$model" --virtual-stages 2 --data "$tmp/none.h5"
expect 1 "4 layers cannot fill 2 stages x 3 virtual stages = 6 chunks" \
    "$PIPENET" train "$model" --stages 2 --schedule interleaved --virtual-stages 3 --data "$tmp/none.h5"
expect 1 "P=2 V=2 M=3: the micro-batches must be a multiple of the stages" \
    mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --stages 2 --schedule interleaved \
    --batch 96 --micro-batches 3 --data "$tmp/none.h5"
echo "ok: plan shows the chunks; errors name the cause"

SRC=/usr/share/datasets/fashion-mnist
[ -d "$SRC" ] || { echo "SKIP: $SRC not installed: no training run"; exit 0; }
"$PIPENET" import fashion-mnist --src "$SRC" --out "$tmp/fm" >/dev/null || fail "import"
sed 's/"train": {/"train": {"schedule": "interleaved", "virtual_stages": 2, /' "$model" >"$tmp/il.json"
grep -q '"virtual_stages": 2' "$tmp/il.json" || fail "could not add the train keys to $model"
mpirun --oversubscribe -np 2 "$PIPENET" train "$tmp/il.json" --data "$tmp/fm/train.h5" \
    --eval "$tmp/fm/test.h5" --stages 2 \
    --steps 3 --threads 1 --log-every 1000 >"$tmp/t" 2>&1 || { cat "$tmp/t"; fail "train from the keys"; }
grep -q "schedule interleaved" "$tmp/t" || { cat "$tmp/t"; fail "the run does not say it is interleaved"; }
sed 's/"train": {/"train": {"virtual_stages": 1, /' "$model" >"$tmp/v1.json"
expect 1 "train.virtual_stages: expected an integer between 2 and 65536, found 1\|virtual_stages.*found 1" \
    "$PIPENET" train "$tmp/v1.json" --data "$tmp/none.h5"
echo "ok: \"schedule\" and \"virtual_stages\" in \"train\" run the interleaved schedule"

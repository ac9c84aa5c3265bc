#!/bin/sh
# Padded sequences end to end: `import text --records` on a generated corpus of
# records of different lengths (some cut into several samples), its misuse refused;
# an lstm model and an lstm + attention model whose input names /lengths trained 30
# steps in one process and on 2 pipeline stages, where the lengths cross the stage
# link and the last stage counts the loss's real positions itself: every step's loss
# agrees within a relative 1e-5, under --deterministic the parameter hashes are
# identical, and the evaluation's loss agrees too. models/char_lstm_records.json
# parses.
set -u
. "$(dirname "$0")/script_fixture.sh"

# 240 records of 1 to 4 lines ("3 plus 5 is 8."), separated by lines "%", a few
# empty records (separators in a row) among them; with --seq 16 a record of 16
# bytes or less is one padded sample and a longer one several
i=0
while [ $i -lt 240 ]; do
    n=$((i % 4 + 1)) k=0
    while [ $k -lt $n ]; do
        a=$(((i + k) % 10)) b=$(((i * 3 + k) % 7))
        echo "$a plus $b is $((a + b))."
        k=$((k + 1))
    done
    echo "%"
    [ $((i % 50)) -eq 7 ] && echo "%"
    i=$((i + 1))
done >"$tmp/records.txt"

# misuse and bad records
"$PIPENET" import text "$tmp/records.txt" --out "$tmp/x" --seq 16 --records "" >/dev/null 2>&1
[ $? -eq 2 ] || fail "--records '' should be misuse (exit 2)"
"$PIPENET" import fashion-mnist --out "$tmp/x" --records % >/dev/null 2>&1
[ $? -eq 2 ] || fail "--records with fashion-mnist should be misuse (exit 2)"
printf 'one record\n%%\nx' >"$tmp/short.txt"
err=$("$PIPENET" import text "$tmp/short.txt" --out "$tmp/x" --seq 16 --records % 2>&1)
[ $? -eq 1 ] || fail "a one-byte record should fail with exit 1"
echo "$err" | grep -q "short.txt: line 3: the record that ends here holds 1 byte" ||
    fail "one-byte record message: $err"
[ ! -e "$tmp/x" ] || fail "a refused import left $tmp/x"

out=$("$PIPENET" import text "$tmp/records.txt" --out "$tmp/rec" --seq 16 --records % 2>&1) ||
    fail "import --records: $out"
echo "$out" | grep -qx "records: 216 in train.h5, 24 in test.h5; 5 empty skipped" ||
    fail "import summary: $out"
# 60 records each of 1..4 lines of 15 or 16 bytes (31 pairs or more: 2..4 samples)
train=$(echo "$out" | sed -n 's/^wrote .*train.h5: \([0-9]*\) samples$/\1/p')
[ -n "$train" ] && [ "$train" -gt 216 ] || fail "train samples: $out"
echo "records: 216 + 24, $train train samples"

lstm='{"name": "rec_lstm",
 "inputs": {"x": {"dataset": "tokens", "ids": true, "seq": 16, "lengths": "lengths"},
            "y": {"dataset": "targets", "ids": true, "seq": 16}},
 "layers": [
  {"name": "embed", "type": "embedding", "input": "x", "vocab": 256, "size": 16},
  {"name": "lstm", "type": "lstm", "input": "embed", "size": 32},
  {"name": "logits", "type": "fc", "input": "lstm", "size": 256},
  {"name": "loss", "type": "softmax_xent", "input": ["logits", "y"]}],
 "train": {"batch": 16, "steps": 30, "seed": 4,
           "optimizer": {"type": "adam", "lr": 0.01}}}'
attn='{"name": "rec_attn",
 "inputs": {"x": {"dataset": "tokens", "ids": true, "seq": 16, "lengths": "lengths"},
            "y": {"dataset": "targets", "ids": true, "seq": 16}},
 "layers": [
  {"name": "embed", "type": "embedding", "input": "x", "vocab": 256, "size": 16,
   "positions": true},
  {"name": "lstm", "type": "lstm", "input": "embed", "size": 16},
  {"name": "attn", "type": "attention", "input": "lstm", "heads": 2},
  {"name": "res", "type": "add", "input": ["lstm", "attn"]},
  {"name": "logits", "type": "fc", "input": "res", "size": 256},
  {"name": "loss", "type": "softmax_xent", "input": ["logits", "y"]}],
 "train": {"batch": 16, "steps": 30, "seed": 4,
           "optimizer": {"type": "adam", "lr": 0.01}}}'
echo "$lstm" >"$tmp/lstm.json"
echo "$attn" >"$tmp/attn.json"

args="--data $tmp/rec/train.h5 --eval $tmp/rec/test.h5 --eval-every 30 --threads 1"
args="$args --log-every 1000 --micro-batches 4"
train() { # train NAME MODEL RANKS [options]: one process, or RANKS on 2 stages
    name=$1 model=$2 ranks=$3
    shift 3
    if [ "$ranks" -eq 1 ]; then
        "$PIPENET" train "$tmp/$model.json" $args --metrics "$tmp/$name.m" "$@" \
            >"$tmp/$name.out" 2>&1
    else
        timeout 300 mpirun --oversubscribe -np "$ranks" "$PIPENET" train "$tmp/$model.json" \
            $args --stages 2 --metrics "$tmp/$name.m" "$@" >"$tmp/$name.out" 2>&1
    fi || { cat "$tmp/$name.out"; fail "train $name"; }
}
losses() { sed -n 's/^{"step": \([0-9]*\), .*"loss": \([0-9.e+-]*\),.*/\1 \2/p' "$1"; }
eval_loss() { sed -n 's/.*"eval_loss": \([0-9.e+-]*\).*/\1/p' "$1" | tail -1; }
hash_of() { grep -o 'parameter hash after 30 steps: [0-9a-f]*' "$1" | cut -d' ' -f6; }

for model in lstm attn; do
    train "${model}1" $model 1 --snapshot-dir "$tmp/snap_$model"
    train "${model}2" $model 2
    losses "$tmp/${model}1.m" >"$tmp/${model}1.l"
    losses "$tmp/${model}2.m" >"$tmp/${model}2.l"
    [ "$(wc -l <"$tmp/${model}1.l")" -eq 30 ] || fail "$model: not 30 steps in the metrics"
    paste -d' ' "$tmp/${model}1.l" "$tmp/${model}2.l" | awk -v m=$model '
        $1 != $3 { bad = bad " " $1 " vs step " $3 }
        { d = $2 - $4; if (d < 0) d = -d; if (d > 1e-5 * $2) bad = bad " " $1 ": " $2 " vs " $4 }
        NR == 1 { first = $2 } END {
            if (NR != 30) { print m ": " NR " steps"; exit 1 }
            if (bad != "") { print m ": 1 process and 2 stages differ at step" bad; exit 1 }
            if (!($2 < first - 1)) { print m ": loss did not fall: " first " -> " $2; exit 1 }
            printf "%s: loss step 1 %s, step 30 %s (1 process) %s (2 stages)\n", m, first, $2, $4 }' ||
        fail "$model losses"
    e1=$(eval_loss "$tmp/${model}1.m") e2=$(eval_loss "$tmp/${model}2.m")
    [ -n "$e1" ] && [ -n "$e2" ] || fail "$model: no evaluation in the metrics"
    awk -v a="$e1" -v b="$e2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * a) }' ||
        fail "$model: eval loss $e1 (1 process) vs $e2 (2 stages)"
    echo "$model: eval loss $e1 (1 process), $e2 (2 stages)"
    # infer reads the lengths too: its mean loss over test.h5 is the evaluation's
    "$PIPENET" infer "$tmp/snap_$model" --data "$tmp/rec/test.h5" >"$tmp/${model}.inf" 2>&1 ||
        { cat "$tmp/${model}.inf"; fail "$model: infer"; }
    i1=$(sed -n 's/.*mean loss \([0-9.e+-]*\).*/\1/p' "$tmp/${model}.inf")
    awk -v a="$e1" -v b="$i1" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b != "" && d <= 1e-4) }' ||
        fail "$model: infer's mean loss '$i1' is not the evaluation's $e1"

    train "${model}d1" $model 1 --deterministic
    train "${model}d2" $model 2 --deterministic
    h1=$(hash_of "$tmp/${model}d1.out") h2=$(hash_of "$tmp/${model}d2.out")
    [ -n "$h1" ] && [ "$h1" = "$h2" ] ||
        fail "$model --deterministic: hash '$h1' (1 process) vs '$h2' (2 stages)"
    echo "$model: --deterministic hash $h1 on both"
done
# the bundled example parses and sends the lstm's padded output to stage 1
here=$(cd "$(dirname "$0")/.." && pwd)
"$PIPENET" plan "$here/models/char_lstm_records.json" --stages 2 >"$tmp/plan" 2>&1 ||
    { cat "$tmp/plan"; fail "plan models/char_lstm_records.json"; }
grep -q '^1  *logits, loss ' "$tmp/plan" || fail "char_lstm_records on 2 stages: $(cat "$tmp/plan")"
echo "PASS: records"

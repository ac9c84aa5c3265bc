#!/bin/sh
# `pipenet plan`: the per-stage table for Fashion-MNIST's MLP on 2 stages (two stage
# rows, a totals line, the (P-1)/(M+P-1) bubble), the expanded repeat blocks of
# models/char_gpt.json on 4 stages, and clean errors for more stages than layers, an
# unknown schedule and a batch that does not split into micro-batches.
set -u
PIPENET=${PIPENET:-./pipenet}
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$PIPENET" plan "$model" --stages 2 --micro-batches 4 >"$tmp/p2" 2>&1 ||
    { cat "$tmp/p2"; fail "plan --stages 2 exited non-zero"; }
cat "$tmp/p2"
head -1 "$tmp/p2" | grep -q "^fashion_mlp: P=2 stages x D=1 replica" || fail "header: $(head -1 "$tmp/p2")"
head -1 "$tmp/p2" | grep -q "M=4 micro-batches of 32 " || fail "micro-batch of 128 / 4 = 32 not in the header"
head -1 "$tmp/p2" | grep -q "schedule 1f1b, predicted bubble 20.0%" || fail "bubble (P-1)/(M+P-1) = 20.0% not in the header"
[ "$(grep -c '^[0-9] ' "$tmp/p2")" -eq 2 ] || fail "expected 2 stage rows"
grep -q '^0 .*fc1' "$tmp/p2" && grep -q '^1 .*loss' "$tmp/p2" || fail "fc1 on stage 0 and loss on stage 1"
# every layer once; parameters add up to fashion_mlp's 1,863,690
for layer in fc1 fc2 out loss; do
    [ "$(grep '^[0-9] ' "$tmp/p2" | grep -cw "$layer")" -eq 1 ] || fail "layer $layer not on exactly one stage"
done
grep '^total ' "$tmp/p2" | grep -q '4 layers  *1863690 ' || fail "totals line: $(grep '^total' "$tmp/p2")"
awk '/^[0-9] / { p += $(NF - 5) } END { exit p != 1863690 }' "$tmp/p2" || fail "stage parameters do not add up"

"$PIPENET" plan "$model" --stages 4 --micro-batches 8 --schedule 1f1b >"$tmp/p4" 2>&1 ||
    { cat "$tmp/p4"; fail "plan --stages 4 1f1b exited non-zero"; }
grep -q "schedule 1f1b, predicted bubble 27.3%" "$tmp/p4" || fail "1f1b P=4 M=8 bubble 3/11: $(head -1 "$tmp/p4")"
[ "$(grep -c '^[0-9] ' "$tmp/p4")" -eq 4 ] || fail "expected 4 stage rows"
"$PIPENET" plan --help | grep -q "usage: pipenet plan" || fail "--help"
"$PIPENET" --help | grep -q "^  plan " || fail "plan is not listed in pipenet --help"

# errors: 1 with a message naming the culprit, 2 for misuse
"$PIPENET" plan "$model" --stages 9 >"$tmp/e1" 2>&1; [ $? -eq 1 ] || fail "--stages 9 accepted"
grep -q "pipenet: error: .*fashion_mlp.json: 4 layers cannot fill 9 stages" "$tmp/e1" || fail "--stages 9 message: $(cat "$tmp/e1")"
"$PIPENET" plan "$model" --stages 2 --schedule zigzag >"$tmp/e2" 2>&1; [ $? -eq 2 ] || fail "bad --schedule accepted"
grep -q "pipenet: error: --schedule: .*gpipe or 1f1b.*zigzag" "$tmp/e2" || fail "--schedule message: $(cat "$tmp/e2")"
"$PIPENET" plan "$model" --stages 2 --micro-batches 3 >"$tmp/e3" 2>&1; [ $? -eq 1 ] || fail "128 / 3 accepted"
grep -q "pipenet: error: the batch 128 (train.batch in .*fashion_mlp.json) does not split into 1 replica x 3 micro-batches" "$tmp/e3" || fail "micro-batch message: $(cat "$tmp/e3")"
"$PIPENET" plan "$model" --stages 2 --batch 100 --replicas 2 --micro-batches 4 >"$tmp/e4" 2>&1; [ $? -eq 1 ] || fail "100 / 8 accepted"
grep -q "pipenet: error: the batch 100 (--batch)" "$tmp/e4" || fail "--batch message: $(cat "$tmp/e4")"
printf '{"inputs": {"x": {"dataset": "f", "size": 784, "seq": 1073741824}},\n "layers": [{"name": "a", "type": "fc", "input": "x", "size": 3}]}\n' >"$tmp/seq.json"
"$PIPENET" plan "$tmp/seq.json" >"$tmp/e5" 2>&1; [ $? -eq 1 ] || fail "a sample of 2^30 rows of 784 accepted"
grep -q "pipenet: error: .*seq.json: inputs.x: expected at most 2147483647 values per sample, found 1073741824 rows of 784" "$tmp/e5" ||
    fail "sample size message: $(cat "$tmp/e5")"
sed 's/"size": [0-9]*/"size": 1/g' "$tmp/seq.json" >"$tmp/rows.json"
"$PIPENET" plan "$tmp/rows.json" --batch 4 >"$tmp/e6" 2>&1; [ $? -eq 1 ] || fail "4 x 2^30 rows accepted"
grep -q "pipenet: error: .*rows.json: inputs.x: 4 samples of 1073741824 rows make 4294967296 rows, more than a matrix holds" "$tmp/e6" ||
    fail "rows message: $(cat "$tmp/e6")"
# models/char_gpt.json's 4 repeated blocks: their 28 copies are placed like any layer
"$PIPENET" plan "$here/models/char_gpt.json" --stages 4 >"$tmp/gpt" 2>&1 ||
    { cat "$tmp/gpt"; fail "plan char_gpt --stages 4 exited non-zero"; }
grep '^total ' "$tmp/gpt" | grep -q ' 32 layers  *867328 ' ||
    fail "char_gpt totals (32 layers, 867328 parameters): $(grep '^total' "$tmp/gpt")"
[ "$(grep -c '^[0-9] ' "$tmp/gpt")" -eq 4 ] || fail "char_gpt: expected 4 stage rows"
grep -q '^0  *embed\.\.' "$tmp/gpt" && grep -q '^3 .*\.\.loss ' "$tmp/gpt" ||
    fail "char_gpt: embed first, loss last: $(cat "$tmp/gpt")"

"$PIPENET" plan >/dev/null 2>&1; [ $? -eq 2 ] || fail "no model accepted"
"$PIPENET" plan "$model" --stages 0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "--stages 0 accepted"
echo "PASS: plan"

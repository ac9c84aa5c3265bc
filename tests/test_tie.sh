#!/bin/sh
# Weight tying end to end: a tiny GPT whose output projection is its embedding's
# table transposed ("tie"), the two uses on different stages with --stages 2. One
# process and 2 stages give the same losses (relative 1e-5); with --deterministic,
# 1 process, 2 stages and 2 replicas x 2 stages end with the same parameter hash;
# a 2-stage snapshot holds the table once and resumes on one process to the same
# hash; the exported model generates text; `plan` counts the table once; a bad
# "tie" is refused with the file, the field and the layer.
set -u
. "$(dirname "$0")/script_fixture.sh"

. "$(dirname "$0")/lm_fixture.sh"
import_times_table 600

# gpt TIE: the tiny GPT with "tie": TIE on its projection
gpt() {
    tiny_gpt 256 '{"batch": 16, "steps": 40, "seed": 3,
           "optimizer": {"type": "adamw", "lr": 0.01, "weight_decay": 0.1, "clip_norm": 0.5}}' \
        ", \"tie\": \"$1\""
}
gpt embed >"$tmp/gpt.json"
model=$tmp/gpt.json

# the 2-stage layout puts the embedding on stage 0 and the projection on stage 1
"$PIPENET" plan "$model" --stages 2 >"$tmp/plan" 2>&1 || { cat "$tmp/plan"; fail "plan"; }
grep -q '^0  *embed\.\.' "$tmp/plan" && grep -Eq '^1  *[a-z_0-9]+\.\.loss \([2-9]' "$tmp/plan" ||
    fail "embed and logits are not on stages 0 and 1: $(cat "$tmp/plan")"
# 256 x 16 table + 16 x 16 positions; 2 blocks (2 layernorms, attention: 4 16 x 16
# matrices and biases, the MLP); ln_f; the projection's bias only (its weight is the table)
params=$(( 4096 + 256 + 2 * (4 * 16 + 4 * 16 * 16 + 4 * 16 + 16 * 32 + 32 + 32 * 16 + 16) + 32 + 256 ))
grep -q "^total .* $params  " "$tmp/plan" || fail "plan's total is not $params: $(grep '^total' "$tmp/plan")"

# train NP NAME [options]: 40 steps on NP ranks, output in $tmp/NAME.out
train() {
    np=$1 name=$2; shift 2
    timeout 300 mpirun --oversubscribe -np "$np" "$PIPENET" train "$model" \
        --data "$tmp/lm/train.h5" --threads 1 --log-every 1000 --metrics "$tmp/$name.jsonl" \
        "$@" >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; fail "$name exited non-zero"; }
}
hash_of() { grep -o 'parameter hash after 40 steps: [0-9a-f]*' "$tmp/$1.out" | cut -d' ' -f6; }
losses() { grep -o '"step": [0-9]*, "epoch": [0-9]*, "loss": [^,]*' "$tmp/$1.jsonl" |
           awk -F'[ ,]+' '{ print $2, $6 }'; }

train 1 one --micro-batches 4
grep -q "tiny_gpt: $params parameters" "$tmp/one.out" ||
    fail "the table is not counted once: $(head -1 "$tmp/one.out")"
train 2 two --stages 2 --micro-batches 4
losses one >"$tmp/a"
losses two >"$tmp/b"
[ "$(wc -l <"$tmp/a")" -eq 40 ] && [ "$(wc -l <"$tmp/b")" -eq 40 ] || fail "not 40 losses each"
paste "$tmp/a" "$tmp/b" | awk '{ d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > m) m = d }
    NR == 1 { first = $2 } END { last = $2
    printf "ok: 1 process vs 2 stages, 40 steps: loss %s -> %s, max relative difference %.3g\n",
           first, last, m; exit !(m <= 1e-5 && last < first - 1) }' ||
    fail "2 stages drifted from 1 process, or the loss did not fall"

# --deterministic: the same bits in every layout, and a 2-stage snapshot resumes on one
train 1 d1 --micro-batches 4 --deterministic
train 2 d2 --stages 2 --micro-batches 4 --deterministic --snapshot-dir "$tmp/snap" \
    --snapshot-every 20
train 4 d4 --stages 2 --micro-batches 2 --deterministic
snap=$tmp/snap/snapshot-0000000020.h5
[ -f "$snap" ] || fail "no snapshot at step 20: $(ls "$tmp/snap")"
train 1 resumed --micro-batches 4 --deterministic --resume "$snap"
h=$(hash_of d1)
[ -n "$h" ] || fail "no hash: $(tail -3 "$tmp/d1.out")"
for run in d2 d4 resumed; do
    [ "$(hash_of $run)" = "$h" ] || fail "--deterministic $run: hash $(hash_of $run), 1 process $h"
done
echo "ok: --deterministic 1 process, 2 stages, 2 x 2, 2 stages -> snapshot -> 1 process: hash $h"

# the snapshot holds the table once, under its own name
"$PIPENET" inspect "$snap" >"$tmp/inspect" 2>&1 || { cat "$tmp/inspect"; fail "inspect"; }
grep -q '^embed/table  *256 x 16 ' "$tmp/inspect" || fail "no embed/table: $(cat "$tmp/inspect")"
! grep -q 'logits/w' "$tmp/inspect" || fail "the snapshot holds the copy: $(cat "$tmp/inspect")"
grep -q "^parameters: .*($(echo $params | sed 's/\(.\)\(...\)$/\1,\2/') floats" "$tmp/inspect" ||
    fail "inspect's count: $(grep '^parameters' "$tmp/inspect")"

# the exported model runs: greedy generation with and without the key/value cache
"$PIPENET" export "$snap" --out "$tmp/model.h5" >/dev/null 2>&1 || fail "export"
for cache in "" --no-cache; do
    "$PIPENET" generate "$tmp/model.h5" --prompt "3 times 4 is" --tokens 12 --temperature 0 \
        $cache >"$tmp/gen$cache" 2>"$tmp/gen.err" || { cat "$tmp/gen.err"; fail "generate $cache"; }
done
[ -s "$tmp/gen" ] && cmp -s "$tmp/gen" "$tmp/gen--no-cache" ||
    fail "generation: '$(cat "$tmp/gen")' vs '$(cat "$tmp/gen--no-cache")' without the cache"
echo "ok: the exported tied model generates \"$(cat "$tmp/gen")\""

# a tie to something that is not an embedding of the right shape
gpt ln_f >"$tmp/bad.json"
"$PIPENET" train "$tmp/bad.json" --data "$tmp/lm/train.h5" >"$tmp/bad.out" 2>&1 &&
    fail "a tie to a layernorm trained"
grep -q "bad.json: layers\[3\]\.tie: expected the name of an embedding layer, found \"ln_f\", a layer of type layernorm (layer 'logits', fc)" "$tmp/bad.out" ||
    fail "message: $(cat "$tmp/bad.out")"
sed 's/"size": 256, "tie"/"size": 128, "tie"/' "$tmp/gpt.json" >"$tmp/bad2.json"
"$PIPENET" plan "$tmp/bad2.json" >"$tmp/bad2.out" 2>&1 && fail "a tie of the wrong vocab planned"
grep -q 'expected an embedding of vocab 128 (this layer.s size) and size 16 (its input width), found "embed" of vocab 256 and size 16' "$tmp/bad2.out" ||
    fail "message: $(cat "$tmp/bad2.out")"
echo "PASS: tie"

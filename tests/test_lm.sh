#!/bin/sh
# A character language model end to end: `import text` on a small generated text, a
# tiny GPT (token + position embedding, 2 pre-LN blocks written as a repeat block,
# causal attention) trained 40 steps in one process and on 2 pipeline stages. The
# loss must fall, and both layouts must follow the same trajectory (layout
# invariance, to float rounding); the evaluation after training reports a loss.
set -u
. "$(dirname "$0")/script_fixture.sh"

. "$(dirname "$0")/lm_fixture.sh"
import_times_table 600

tiny_gpt 256 '{"batch": 16, "steps": 40, "seed": 3,
           "optimizer": {"type": "adam", "lr": 0.01}}' >"$tmp/gpt.json"
args="--data $tmp/lm/train.h5 --eval $tmp/lm/test.h5 --threads 1 --log-every 1000"
"$PIPENET" train "$tmp/gpt.json" $args --metrics "$tmp/m1" >"$tmp/out1" 2>&1 ||
    { cat "$tmp/out1"; fail "train, 1 process"; }
timeout 120 mpirun --oversubscribe -np 2 "$PIPENET" train "$tmp/gpt.json" $args --stages 2 \
    --metrics "$tmp/m2" >"$tmp/out2" 2>&1 || { cat "$tmp/out2"; fail "train, 2 stages"; }

# loss at step S of a metrics file
loss() { sed -n "s/^{\"step\": $2, .*\"loss\": \([0-9.e+-]*\),.*/\1/p" "$1"; }
first=$(loss "$tmp/m1" 1) last=$(loss "$tmp/m1" 40) last2=$(loss "$tmp/m2" 40)
[ -n "$first" ] && [ -n "$last" ] && [ -n "$last2" ] ||
    fail "no step 1 or 40 in the metrics: $(head -c 400 "$tmp/m1")"
echo "loss: step 1 $first, step 40 $last (1 process), $last2 (2 stages)"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.5) }' ||
    fail "the loss did not fall by 1.5 in 40 steps: $first -> $last"
awk -v a="$last" -v b="$last2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-3 * a) }' ||
    fail "2 stages and 1 process differ at step 40: $last2 vs $last"
grep -q '"eval_loss": [0-9]' "$tmp/m1" || fail "no evaluation in the metrics"
# a sequence model counts tokens: 16 per sample, in the metrics and the epoch line
awk -F'"samples_per_s": |, "tokens_per_s": |}' '/"step": 40,/ {
    r = $3 / $2; exit !(r > 15.999 && r < 16.001) }' "$tmp/m1" ||
    fail "tokens_per_s is not 16 x samples_per_s: $(grep '"step": 40,' "$tmp/m1")"
grep -q '^epoch 1: .* samples/s, [0-9]* tokens/s)$' "$tmp/out1" ||
    fail "no tokens/s in the epoch line: $(grep '^epoch' "$tmp/out1")"

# --epochs on the command line replaces the model's train.steps (40 here)
"$PIPENET" train "$tmp/gpt.json" $args --eval "" --epochs 1 >"$tmp/out3" 2>&1 ||
    { cat "$tmp/out3"; fail "train --epochs 1"; }
grep '^training ' "$tmp/out3" | grep -Eq ' ([0-9]+) steps/epoch, \1 steps,' ||
    fail "--epochs 1 did not replace train.steps: $(grep '^training ' "$tmp/out3")"
echo "PASS: lm"

# Sourced by the language-model tests (test_lm.sh, test_generate.sh, test_tie.sh, the GPU
# rank tests): a learnable text and a tiny GPT, written once.

# times_table LINES: lines such as "7 times 3 is 21." (learnable, not constant)
times_table() {
    i=0
    while [ $i -lt "$1" ]; do
        echo "$((i % 10)) times $((i % 7)) is $(((i % 10) * (i % 7)))."
        i=$((i + 1))
    done
}

# import_times_table LINES [SEQ]: times_table LINES as $tmp/text.txt, imported by
# `pipenet import text` in windows of SEQ ids (16 unless given) into $tmp/lm
# (train.h5, test.h5)
import_times_table() {
    times_table "$1" >"$tmp/text.txt"
    "$PIPENET" import text "$tmp/text.txt" --out "$tmp/lm" --seq "${2:-16}" >/dev/null ||
        fail "import text"
}

# tiny_gpt VOCAB TRAIN [LOGITS]: a GPT over windows of 16 ids (token + position
# embedding of width 16, 2 pre-LN blocks written as a repeat block, 2-head causal
# attention, a gelu MLP of 32), VOCAB embedding rows and logits, TRAIN the "train"
# object, LOGITS more attributes of the projection (e.g. `, "tie": "embed"`).
tiny_gpt() {
    cat <<JSON
{"name": "tiny_gpt",
 "inputs": {"x": {"dataset": "tokens", "ids": true, "seq": 16},
            "y": {"dataset": "targets", "ids": true, "seq": 16}},
 "layers": [
  {"name": "embed", "type": "embedding", "input": "x", "vocab": $1, "size": 16,
   "positions": true},
  {"repeat": 2, "name": "blocks", "input": "embed", "layers": [
    {"name": "ln1", "type": "layernorm", "input": "\$in"},
    {"name": "attn", "type": "attention", "input": "ln1", "heads": 2},
    {"name": "res1", "type": "add", "input": ["\$in", "attn"]},
    {"name": "ln2", "type": "layernorm", "input": "res1"},
    {"name": "mlp1", "type": "fc", "input": "ln2", "size": 32, "act": "gelu"},
    {"name": "mlp2", "type": "fc", "input": "mlp1", "size": 16},
    {"name": "res2", "type": "add", "input": ["res1", "mlp2"]}]},
  {"name": "ln_f", "type": "layernorm", "input": "blocks"},
  {"name": "logits", "type": "fc", "input": "ln_f", "size": $1${3:-}},
  {"name": "loss", "type": "softmax_xent", "input": ["logits", "y"]}],
 "train": $2}
JSON
}

# gpt_job STEPS: the times table as $tmp/lm (windows of 16 bytes) and the tiny GPT of
# 256 ids trained STEPS steps (batch 16, seed 5, adamw with weight decay and clipping)
# as $tmp/gpt.json: the GPU rank tests' job
gpt_job() {
    times_table 400 >"$tmp/text.txt"
    "$PIPENET" import text "$tmp/text.txt" --out "$tmp/lm" --seq 16 >/dev/null || fail "import text"
    tiny_gpt 256 "{\"batch\": 16, \"steps\": $1, \"seed\": 5,
           \"optimizer\": {\"type\": \"adamw\", \"lr\": 0.01, \"weight_decay\": 0.1, \"clip_norm\": 1.0}}" \
        >"$tmp/gpt.json"
}

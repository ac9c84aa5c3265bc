# Sourced by the sharded-table tests (test_shard.sh, test_shard_ahead.sh,
# test_shard_optimizer.sh) after script_fixture.sh: makes $PIPENET absolute, sets
# $fixtures (the tests' folder), moves into $tmp and writes there synthetic-ctr data
# in ctr/ (3200 training samples of 26 fields x 20 ids, 200 to test) and a small
# DeepFM over it, its embedding_bag and sparse_fc sharded by rows (shard.json,
# shard1.json) or whole (whole.json, whole1.json); the *1.json without stage
# attributes, the others on 2 stages.
PIPENET=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
fixtures=$(cd "$(dirname "$0")" && pwd)
cd "$tmp" || exit 1
"$PIPENET" import synthetic-ctr --out ctr --samples 3200 --test-samples 200 --vocab 20 \
    --logit-scale 3 >import.out 2>&1 || { cat import.out; fail "import synthetic-ctr"; }
# model SHARD [ROWS]: the DeepFM of 26 fields x 20 ids; SHARD "rows" or "none"
model() {
    cat <<JSON
{"name": "deepfm_small",
 "inputs": {"x": {"dataset": "features", "sparse": true, "columns": 520, "fields": 26},
            "y": {"dataset": "labels", "ids": true}},
 "layers": [
  {"name": "emb", "type": "embedding_bag", "input": "x", "rows": ${2:-520}, "size": 8,
   "shard": "$1", "stage": 0},
  {"name": "wide", "type": "sparse_fc", "input": "x", "rows": 520, "size": 1, "shard": "$1",
   "stage": 0},
  {"name": "fm", "type": "fm", "input": "emb", "stage": 0},
  {"name": "flat", "type": "flatten", "input": "emb", "stage": 0},
  {"name": "d1", "type": "fc", "input": "flat", "size": 32, "act": "relu", "stage": 1},
  {"name": "deep", "type": "fc", "input": "d1", "size": 1, "stage": 1},
  {"name": "logit", "type": "add", "input": ["wide", "fm", "deep"], "stage": 1},
  {"name": "loss", "type": "sigmoid_xent", "input": ["logit", "y"], "stage": 1}],
 "train": {"batch": 64, "seed": 3, "optimizer": {"type": "adam", "lr": 0.01, "beta1": 0}}}
JSON
}
model rows >shard.json
model none >whole.json
sed 's/, "stage": [01]//' shard.json >shard1.json # one stage: no attributes
sed 's/, "stage": [01]//' whole.json >whole1.json


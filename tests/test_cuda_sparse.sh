#!/bin/sh
# The sparse layers on a GPU against the CPU: a small DeepFM over a CSR input
# (tests/h5_fixture's `csr` file: 1000 columns, 3 fields) — sparse_input ->
# embedding_bag (ids hashed into 128 rows) -> fm and flatten -> fc, plus sparse_fc,
# into sigmoid_xent — trained 16 steps with one seed on --device cuda and --device
# cpu: step losses within gpu_fixture.sh's loss_rtol, the evaluations' AUC and
# log-loss alike; infer of one trained model on either device writes the same
# logits, scores and predictions. Where mpirun is (not in scripts/gpu_bundle.sh's
# bundle), 2 replicas on cuda give the one-process cuda run's --deterministic
# parameter hash: the replicas' row-sparse gradients go through host memory to MPI
# and back (pipeline/stage.c); so do 2 replicas with both tables sharded by rows
# (pipeline/shard_rows.c: rows pulled and pushed through host memory). The bag plan
# is built on the host and copied to the device, and the tables' gradients are
# row-sparse (layers/row_grad.h), so this checks both on a device. Skips (77) without CUDA in the build or a GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
. "$here/gpu_fixture.sh"
need_h5_fixture
fix=$H5
need_gpu

"$fix" csr "$tmp/train.h5" features 512 1000 3 || fail "h5_fixture csr train"
"$fix" csr "$tmp/eval.h5" features 160 1000 3 || fail "h5_fixture csr eval"
cat >"$tmp/m.json" <<'JSON'
{"name": "deepfm", "inputs": {"x": {"dataset": "features", "sparse": true, "columns": 1000,
                                    "fields": 3},
                              "y": {"dataset": "labels", "ids": true}},
 "layers": [
  {"name": "emb", "type": "embedding_bag", "input": "x", "rows": 128, "size": 4},
  {"name": "wide", "type": "sparse_fc", "input": "x", "rows": 1000, "size": 1},
  {"name": "fm", "type": "fm", "input": "emb"},
  {"name": "flat", "type": "flatten", "input": "emb"},
  {"name": "d1", "type": "fc", "input": "flat", "size": 8, "act": "relu"},
  {"name": "deep", "type": "fc", "input": "d1", "size": 1},
  {"name": "logit", "type": "add", "input": ["wide", "fm", "deep"]},
  {"name": "loss", "type": "sigmoid_xent", "input": ["logit", "y"]}],
 "train": {"batch": 32, "steps": 16, "seed": 3, "optimizer": {"type": "adam", "lr": 0.05}}}
JSON
same_binary_training "$tmp/m.json" "$tmp/train.h5" "$tmp/eval.h5"

# one model, inferred on both devices: the same outputs (to rounding) and predictions
model=$tmp/snap_cpu/snapshot-0000000016.h5
same_binary_inference "$model" "$tmp/eval.h5" "$fix"
# 2 replicas against 1 process, both on cuda, 4 micro-batches a step in all: one
# --deterministic hash
replicas=skipped
if command -v mpirun >/dev/null 2>&1; then
    for np in 1 2; do
        mpirun --oversubscribe -np $np "$PIPENET" train "$tmp/m.json" --data "$tmp/train.h5" \
            --eval= --threads 1 --device cuda --deterministic --micro-batches $((4 / np)) --log-every 1000 \
            >"$tmp/det_$np" 2>&1 || { cat "$tmp/det_$np"; fail "train --device cuda on $np ranks"; }
        grep -o 'parameter hash after [0-9]* steps: [0-9a-f]*' "$tmp/det_$np" >"$tmp/hash_$np"
    done
    [ -s "$tmp/hash_1" ] && cmp -s "$tmp/hash_1" "$tmp/hash_2" ||
        fail "2 replicas on cuda: $(cat "$tmp/hash_2"), 1 process: $(cat "$tmp/hash_1")"
    sed '/embedding_bag\|sparse_fc/s/}$/, "shard": "rows"}/; /embedding_bag\|sparse_fc/s/},$/, "shard": "rows"},/' \
        "$tmp/m.json" >"$tmp/shard.json"
    [ "$(grep -c '"shard": "rows"' "$tmp/shard.json")" -eq 2 ] || fail "no sharded model"
    mpirun --oversubscribe -np 2 "$PIPENET" train "$tmp/shard.json" --data "$tmp/train.h5" \
        --eval= --threads 1 --device cuda --deterministic --micro-batches 2 --log-every 1000 \
        >"$tmp/det_shard" 2>&1 || { cat "$tmp/det_shard"; fail "train sharded on cuda"; }
    grep -o 'parameter hash after [0-9]* steps: [0-9a-f]*' "$tmp/det_shard" >"$tmp/hash_shard"
    cmp -s "$tmp/hash_1" "$tmp/hash_shard" ||
        fail "2 sharded replicas on cuda: $(cat "$tmp/hash_shard"), 1 process: $(cat "$tmp/hash_1")"
    replicas="the same hash on 2 replicas, tables whole or sharded"
fi
echo "PASS: the sparse DeepFM trains and infers on cuda as on cpu (infer AUC $auc_cpu; $replicas)"

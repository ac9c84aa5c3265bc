#!/bin/sh
# A step's time against a table's size: a Wide & Deep model (embedding_bag of size 8
# and sparse_fc over 26 fields, adam, batch 256) on synthetic-ctr data of 26 x 384 =
# 9984 columns, with tables of 10^4 and 10^7 rows: the ids index both tables directly
# (no hashing), so every step touches the same rows and only the table's size
# differs; with row-sparse gradients the step should not depend on it. The two sizes
# alternate run by run (the machine's load drifts). Prints, per size, the median step
# time of steps 11..STEPS of each run and the median of those.
# Usage: bench/bench_row_sparse.sh [PIPENET [STEPS [RUNS]]]
set -eu
PIPENET=${1:-./pipenet}
STEPS=${2:-60}
RUNS=${3:-5}
SIZES="10000 10000000"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$PIPENET" import synthetic-ctr --out "$dir/ctr" --samples 20000 --test-samples 1000 \
    --vocab 384 >/dev/null
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for rows in $SIZES; do
    cat >"$dir/m$rows.json" <<JSON
{"name": "wdb", "inputs": {"x": {"dataset": "features", "sparse": true, "columns": 9984,
                                "fields": 26}, "y": {"dataset": "labels", "ids": true}},
 "layers": [
  {"name": "emb", "type": "embedding_bag", "input": "x", "rows": $rows, "size": 8},
  {"name": "flat", "type": "flatten", "input": "emb"},
  {"name": "h", "type": "fc", "input": "flat", "size": 32, "act": "relu"},
  {"name": "deep", "type": "fc", "input": "h", "size": 2},
  {"name": "wide", "type": "sparse_fc", "input": "x", "rows": $rows, "size": 2},
  {"name": "sum", "type": "add", "input": ["deep", "wide"]},
  {"name": "loss", "type": "softmax_xent", "input": ["sum", "y"]}],
 "train": {"batch": 256, "seed": 1, "optimizer": {"type": "adam", "lr": 0.01}}}
JSON
    : >"$dir/runs$rows"
done
for run in $(seq "$RUNS"); do
    for rows in $SIZES; do
        "$PIPENET" train "$dir/m$rows.json" --data "$dir/ctr/train.h5" --eval= --threads 1 \
            --steps "$STEPS" --metrics "$dir/m.jsonl" >/dev/null 2>&1
        awk -F'"samples_per_s": ' '/"step"/ { split($0, a, "\"step\": "); split(a[2], b, ",");
                if (b[1] + 0 > 10) print 256 * 1000 / ($2 + 0) }' "$dir/m.jsonl" |
            median >>"$dir/runs$rows"
    done
done
for rows in $SIZES; do
    echo "$rows rows: step ms per run: $(tr '\n' ' ' <"$dir/runs$rows")median $(median <"$dir/runs$rows")"
done

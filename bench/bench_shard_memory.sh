#!/bin/sh
# Memory of a table sharded by rows ("shard": "rows", docs/sparse.md), measured: a
# 20M x 16 embedding_bag table with adam (values 1.19 GiB + slots m and v, 3.58 GiB
# in all) trains on `mpirun -np 2` unsharded (each rank holds the whole table and its
# slots) and sharded (each rank holds half the rows, ceil/floor of 20M / 2), and each
# rank's peak resident memory (the kernel's maximum RSS of the process, through
# /usr/bin/time -f %M around each rank) is printed beside what the table's share
# predicts. The model: the synthetic-ctr data's 26 fields of 100 ids (2600 columns,
# their ids the table's first 2600 rows: the other rows are never touched but held,
# initialized and zeroed like any) -> embedding_bag (one table shared by the fields)
# -> flatten -> fc 1 -> sigmoid_xent; STEPS steps of batch 256, no snapshots
# (--snapshot-dir "": sharded tables have no snapshot writer yet).
#
# Every shard draws the whole table's random stream at init and keeps its rows (so
# the values equal the unsharded table's and the two runs train to one parameter
# hash, which is checked): the init takes as long sharded, the memory does not.
#
# usage: bench/bench_shard_memory.sh [PIPENET] [--rows N] [--steps N] [--out DIR]
# Exits 77 without mpirun or /usr/bin/time. Needs about 2 x (4 x the table) of
# memory for the unsharded run (about 10 GiB at 20M rows: the values, m, v, and a
# host copy of the values while they are initialized).
set -u
cd "$(dirname "$0")/.." || exit 1
PIPENET=./pipenet
case ${1:-} in -*|'') ;; *) PIPENET=$1; shift ;; esac
ROWS=20000000 STEPS=20 OUT=
while [ $# -gt 0 ]; do
    case $1 in
    --rows) ROWS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "bench_shard_memory: unknown option $1" >&2; exit 2 ;;
    esac
done
. bench/mpi_fixture.sh
bench_mpi bench_shard_memory peak-rss
BATCH=256
"$PIPENET" import synthetic-ctr --out "$out/data" --samples $((BATCH * (STEPS + 2))) \
    --test-samples 1000 >"$out/import.log" 2>&1 || { cat "$out/import.log"; exit 1; }

# model SHARD: the model, "shard": SHARD on its table
model() {
    cat <<JSON
{"name": "big_table",
 "inputs": {"x": {"dataset": "features", "sparse": true, "columns": 2600, "fields": 26},
            "y": {"dataset": "labels", "ids": true}},
 "layers": [
  {"name": "emb", "type": "embedding_bag", "input": "x", "rows": $ROWS, "size": 16,
   "shard": "$1"},
  {"name": "flat", "type": "flatten", "input": "emb"},
  {"name": "out", "type": "fc", "input": "flat", "size": 1},
  {"name": "loss", "type": "sigmoid_xent", "input": ["out", "y"]}],
 "train": {"batch": $BATCH, "seed": 1, "optimizer": {"type": "adam", "lr": 0.01}}}
JSON
}
# each rank under GNU time, its maximum RSS (KiB) into NAME.rss.RANK
cat >"$out/rss.sh" <<'SH'
#!/bin/sh
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
exec /usr/bin/time -f %M -o "$RSS_PREFIX.$rank" "$@"
SH
chmod +x "$out/rss.sh"

for layout in none rows; do
    model $layout >"$out/$layout.json"
    start=$(date +%s)
    RSS_PREFIX=$out/$layout.rss "$MPIRUN" --oversubscribe -x RSS_PREFIX -np 2 "$out/rss.sh" \
        "$PIPENET" train "$out/$layout.json" --data "$out/data/train.h5" --eval= \
        --steps "$STEPS" --threads 1 --log-every 1000 --snapshot-dir "" \
        >"$out/$layout.log" 2>&1 || { cat "$out/$layout.log"; exit 1; }
    echo $(($(date +%s) - start)) >"$out/$layout.seconds"
done
hash() { grep -o 'parameter hash after [0-9]* steps: [0-9a-f]*' "$1"; }
same=no
[ -n "$(hash "$out/none.log")" ] && [ "$(hash "$out/none.log")" = "$(hash "$out/rows.log")" ] &&
    same=yes

{
    echo "a $ROWS x 16 embedding_bag table, adam (values + m + v), $STEPS steps of batch" \
        "$BATCH on mpirun -np 2; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%-10s %5s %14s %22s %9s\n' layout rank "peak RSS MiB" "table + slots MiB" "run s"
    for layout in none rows; do
        for rank in 0 1; do
            # the rows this rank holds: all, or its shard (ids r mod 2)
            held=$ROWS
            [ $layout = rows ] && held=$(((ROWS - rank + 1) / 2))
            printf '%-10s %5d %14.0f %22.0f %9d\n' \
                "$([ $layout = rows ] && echo sharded || echo unsharded)" $rank \
                "$(awk '{ print $1 / 1024 }' "$out/$layout.rss.$rank")" \
                "$(awk -v r="$held" 'BEGIN { print 3 * r * 16 * 4 / 1048576 }')" \
                "$(cat "$out/$layout.seconds")"
        done
    done
    echo "same parameter hash sharded and unsharded: $same"
} | tee "$out/bench_shard_memory.txt"
echo "logs and results in $out"
[ $same = yes ]

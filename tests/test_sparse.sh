#!/bin/sh
# Sparse (CSR) inputs end to end, on tests/h5_fixture's `csr` file (400 samples,
# 1000 columns, 3 fields; every fifth sample empty): a Wide & Deep model
# (sparse_input -> embedding_bag (ids hashed into 256 rows) -> seq_pool -> fc, plus
# sparse_fc) learns it (the loss falls), and with --deterministic trains to the same
# parameter hash on 1 process, 2 stages (the embedding on stage 0), 2 replicas, 2 x 2,
# read row by row instead of cached, gpipe with --recompute, interleaved (the two
# tables in chunks of both stages) and 2 x 2 with --recompute; a 1-process snapshot
# resumes on 2 stages to the straight run's hash; export and infer run it. A dense
# model on the group and a sparse input on a dataset are refused by name
# (test_reader_csr has the rest). The tables' gradients are row-sparse
# (layers/row_grad.h): each micro-batch's entries are sealed into partials (one per
# id) after its backward, so the layouts above also check that every schedule seals
# a micro-batch once and the replicas' partials are summed in one order; adam on them
# is lazy (untouched rows do not move), which learns this set slower: lr 0.2, not 0.05.
set -u
. "$(dirname "$0")/script_fixture.sh"
PIPENET=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
. "$(dirname "$0")/tiny_fixture.sh"
cd "$tmp" || exit 1

"$fix" csr d.h5 features 400 1000 3 || fail "h5_fixture csr"
cat >m.json <<'JSON'
{"name": "wd", "inputs": {"x": {"dataset": "features", "sparse": true, "columns": 1000,
                                "fields": 3},
                          "y": {"dataset": "labels", "ids": true}},
 "layers": [
  {"name": "emb", "type": "embedding_bag", "input": "x", "rows": 256, "size": 8, "stage": 0},
  {"name": "pool", "type": "seq_pool", "input": "emb", "mode": "mean", "stage": 0},
  {"name": "wide", "type": "sparse_fc", "input": "x", "rows": 1000, "size": 2, "stage": 0},
  {"name": "deep", "type": "fc", "input": "pool", "size": 2, "stage": 1},
  {"name": "sum", "type": "add", "input": ["deep", "wide"], "stage": 1},
  {"name": "loss", "type": "softmax_xent", "input": ["sum", "y"], "stage": 1}],
 "train": {"batch": 16, "seed": 1, "optimizer": {"type": "adam", "lr": 0.2}}}
JSON
sed 's/, "stage": [01]//' m.json >m1.json # one stage: no attributes
grep -q stage m1.json && fail "m1.json keeps a stage"

# go NAME MODEL [mpirun N] train options...: a deterministic run, its hash in NAME.hash
go() {
    name=$1 model=$2; shift 2
    launch=
    if [ "$1" = mpirun ]; then launch="mpirun --oversubscribe -np $2"; shift 2; fi
    $launch "$PIPENET" train $model --data d.h5 --eval= --threads 1 --log-every 1000 \
        --deterministic "$@" >"$name.out" 2>&1 || { cat "$name.out"; fail "$name: exit $?"; }
    grep -o 'parameter hash after [0-9]* steps: [0-9a-f]*' "$name.out" >"$name.hash"
}

# plan says what each table's row-sparse gradient takes instead of the table
"$PIPENET" plan m1.json >plan.out 2>&1 || { cat plan.out; fail "plan: exit $?"; }
grep -q "emb/table on stage 0: 256 x 8, values 0.01 MiB + 2 optimizer slots 0.02 MiB; gradient per step 72 B per feature" plan.out &&
    grep -q "wide/W on stage 0: 1000 x 2" plan.out || { cat plan.out; fail "plan: no row-sparse tables"; }

# a table sharded by rows over D=2 replicas: plan gives each rank's share beside the
# whole table, and the measured memory per rank counts the shard (100001 x 8: 50001
# rows on replica 0; + wide 1000 x 2 + deep 18 = 402026 floats, 1.53 MiB, slots
# twice that) and no dense gradient for the row-sparse tables (deep's 18 floats)
sed 's/"rows": 256, "size": 8/"rows": 100001, "size": 8, "shard": "rows"/' m1.json >ms.json
"$PIPENET" plan ms.json --replicas 2 --measure --repeat 1 >plans.out 2>&1 ||
    { cat plans.out; fail "plan sharded: exit $?"; }
grep -q "sharded by rows over D=2 replicas: per rank 50001 or 50000 rows, values 1.53 MiB + slots 3.05 MiB" plans.out &&
    grep -q "(unsharded: 100001 rows, values 3.05 MiB + slots 6.10 MiB on every rank)" plans.out &&
    grep -Eq '^total( +[0-9.]+){5} +1\.53 +0\.00 +3\.07 ' plans.out ||
    { cat plans.out; fail "plan: no shard per rank"; }
[ "$(grep -c sharded plan.out)" -eq 0 ] || { cat plan.out; fail "plan: an unsharded table said sharded"; }

go one m1.json --steps 40 --micro-batches 4 --snapshot-dir snap1
losses=$(grep -o 'epoch [0-9]*: train loss [0-9.]*' one.out | awk '{print $5}')
first=$(echo "$losses" | head -1) last=$(echo "$losses" | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.6 * a) }' ||
    { cat one.out; fail "the loss did not fall: $first -> $last"; }
want=$(cat one.hash)
[ -n "$want" ] || { cat one.out; fail "no hash"; }
go stages m.json mpirun 2 --steps 40 --micro-batches 4
go replicas m1.json mpirun 2 --steps 40 --micro-batches 2
go grid m.json mpirun 4 --steps 40 --micro-batches 2
go uncached m1.json --steps 40 --micro-batches 4 --data-cache 0
# each micro-batch's partials are sealed once under every schedule and --recompute
go gpipe m.json mpirun 2 --steps 40 --micro-batches 4 --schedule gpipe --recompute
go inter m1.json mpirun 2 --steps 40 --micro-batches 4 --stages 2 --schedule interleaved \
    --virtual-stages 2
go gridre m.json mpirun 4 --steps 40 --micro-batches 2 --recompute
for n in stages replicas grid uncached gpipe inter gridre; do
    [ "$(cat $n.hash)" = "$want" ] || { cat $n.out; fail "$n: $(cat $n.hash), not $want"; }
done
grep -q "stage 1" stages.out || { cat stages.out; fail "no second stage"; }
# the hashing is said once a run, by the stage that holds the layer
for n in one stages grid; do
    [ "$(grep -c "layer 'emb' (embedding_bag): 1000 columns hashed into 256 rows" $n.out)" -eq 1 ] ||
        { cat $n.out; fail "$n: the hashing is not said once"; }
done
! grep -q "layer 'wide'.*hashed" one.out || fail "sparse_fc's 1000 rows hold every column: no hash"

# half the steps on 1 process, the rest resumed on 2 stages: the straight run's hash
go half m1.json --steps 20 --micro-batches 4 --snapshot-dir snap2
go resumed m.json mpirun 2 --steps 40 --micro-batches 4 --snapshot-dir snap2 --resume snap2
[ "$(cat resumed.hash)" = "$want" ] || { cat resumed.out; fail "resumed: not $want"; }

expect 0 "exported" "$PIPENET" export snap1 --out model.h5
expect 0 "accuracy" "$PIPENET" infer model.h5 --data d.h5 --out pred.h5
acc=$(grep -o 'accuracy [0-9.]*' "$tmp/out" | awk '{print $2}')
awk -v a="$acc" 'BEGIN { exit !(a > 80) }' || { cat "$tmp/out"; fail "accuracy $acc"; }

# refusals, each naming the file and the group
tiny_model dense.json
train dense dense.json d.h5
refused dense "d.h5" "'/features' is not a dataset"
"$fix" dataset plain.h5 40
sed 's/"batch": 16/"batch": 8/' m1.json >m8.json
"$PIPENET" train m8.json --data plain.h5 --eval= --steps 2 >asdense.out 2>&1
rc=$?
refused asdense "plain.h5: '/features' is a dataset, but input 'x' is sparse"
exit 0

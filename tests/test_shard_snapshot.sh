#!/bin/sh
# Snapshots of tables sharded by rows ("shard": "rows"; docs/sparse.md, "Snapshots of
# sharded tables"), on a small synthetic-ctr set and a DeepFM-like model whose
# embedding_bag (523 rows) and sparse_fc (521 rows) are sharded: neither count
# divides by 2, 3 or 4, so the shards differ in size. With --deterministic and one
# micro-batch size (batch 256: 1 process 4 micro-batches, 2 replicas 2, 4 replicas 1):
#  1. 2 sharded replicas write what 1 unsharded process writes: the same hash and
#     every dataset equal byte for byte, the tables whole in id order and their Adam
#     slots too (h5py; where /usr/bin/python3 lacks it, `pipenet inspect --compare`,
#     parameters only); so do 2 stages x 2 replicas with a sharded table on each
#     stage (rank 0 writes stage 1's owners' rows) and 3 replicas against 3 unsharded;
#  2. resumes across shard counts: 10 steps on 2 sharded ranks, on to 20 on 4, to 30
#     on 1 process (the tables whole), to 40 on 2 ranks unsharded: each has the hash
#     of the straight run of as many steps; a 2 x 2 run resumes its own snapshot;
#  3. the export of a sharded run's snapshot equals an unsharded run's;
#  4. a snapshot of parts (version 2: an index over one part per writer) with a part
#     corrupted in its table's values (in its middle without h5py), cut short or
#     missing is refused by a sharded resume, by export and by inspect, naming the
#     part; an index whose table points at a file that is not its part (a hostile
#     VDS), or at a part-named file that does not hold its values, is refused too.
set -u
. "$(dirname "$0")/script_fixture.sh"
PIPENET=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
fix=${TESTS_BUILDDIR:-$(cd "$(dirname "$0")" && pwd)}/h5_fixture
cd "$tmp" || exit 1

"$PIPENET" import synthetic-ctr --out ctr --samples 4000 --test-samples 500 --vocab 20 \
    >import.out 2>&1 || { cat import.out; fail "import synthetic-ctr"; }
cat >grid.json <<'JSON'
{"name": "fm", "inputs": {"x": {"dataset": "features", "sparse": true, "columns": 520,
                                "fields": 26},
                          "y": {"dataset": "labels", "ids": true}},
 "layers": [
  {"shard": "rows", "name": "emb", "type": "embedding_bag", "input": "x", "rows": 523,
   "size": 4, "stage": 0},
  {"shard": "rows", "name": "wide", "type": "sparse_fc", "input": "x", "rows": 521,
   "size": 1, "stage": 1},
  {"name": "fm", "type": "fm", "input": "emb", "stage": 0},
  {"name": "flat", "type": "flatten", "input": "emb", "stage": 0},
  {"name": "d1", "type": "fc", "input": "flat", "size": 16, "act": "relu", "stage": 1},
  {"name": "deep", "type": "fc", "input": "d1", "size": 1, "stage": 1},
  {"name": "logit", "type": "add", "input": ["wide", "fm", "deep"], "stage": 1},
  {"name": "loss", "type": "sigmoid_xent", "input": ["logit", "y"], "stage": 1}],
 "train": {"batch": 256, "seed": 1, "optimizer": {"type": "adam", "lr": 0.01}}}
JSON
sed 's/, "stage": [01]//' grid.json >sharded.json # one stage: no attributes
sed 's/"shard": "rows", //' sharded.json >whole.json
grep -q stage sharded.json && fail "sharded.json keeps a stage"
grep -q shard whole.json && fail "whole.json keeps a shard"

# go NAME MODEL [mpirun N] train options...: a deterministic run, its hash in NAME.hash
go() {
    name=$1 model=$2; shift 2
    launch=
    if [ "$1" = mpirun ]; then launch="mpirun --oversubscribe -np $2"; shift 2; fi
    $launch "$PIPENET" train $model --data ctr/train.h5 --eval= --threads 1 --log-every 1000 \
        --deterministic "$@" >"$name.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { cat "$name.out"; fail "$name: exit $rc"; }
    grep -o 'parameter hash after [0-9]* steps: [0-9a-f]*' "$name.out" >"$name.hash"
    [ -s "$name.hash" ] || { cat "$name.out"; fail "$name: no hash"; }
}
# same NAME WANT: run NAME ended with run WANT's hash
same() {
    [ "$(cat "$1.hash")" = "$(cat "$2.hash")" ] ||
        { cat "$1.out"; fail "$1: $(cat "$1.hash"), not $2's $(cat "$2.hash")"; }
}
# identical A B: every dataset of files A and B holds the same bytes (h5py), else
# every parameter the same values (pipenet inspect)
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
    identical() {
        /usr/bin/python3 - "$1" "$2" <<'PY' || fail "$1 and $2 differ"
import sys, h5py
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
def arrays(f):
    out = {}
    f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out
x, y = arrays(a), arrays(b)
if sorted(x) != sorted(y):
    sys.exit("datasets: %s vs %s" % (sorted(x), sorted(y)))
bad = [n for n in x if x[n].shape != y[n].shape or x[n].dtype != y[n].dtype
       or x[n].tobytes() != y[n].tobytes()]
if bad:
    sys.exit("differ: %s" % bad)
if "optimizer" in a and not any(n.startswith("optimizer/emb/table/") for n in x):
    sys.exit("no Adam slots of the table") # a snapshot, not an export
PY
    }
else
    echo "note: /usr/bin/python3 has no h5py: comparing parameters only (pipenet inspect)"
    identical() {
        "$PIPENET" inspect "$1" --compare "$2" >cmp.out 2>&1 ||
            { cat cmp.out; fail "$1 and $2 differ"; }
    }
fi

# 1. a sharded run's snapshot is an unsharded run's
go whole20 whole.json --steps 20 --micro-batches 4 --snapshot-dir whole20
go sharded20 sharded.json mpirun 2 --steps 20 --micro-batches 2 --snapshot-dir sharded20
same sharded20 whole20
identical whole20/snapshot-0000000020.h5 sharded20/snapshot-0000000020.h5
go grid20 grid.json mpirun 4 --steps 20 --micro-batches 2 --snapshot-dir grid20 --recompute
same grid20 whole20
identical whole20/snapshot-0000000020.h5 grid20/snapshot-0000000020.h5
go whole3 whole.json mpirun 3 --steps 20 --batch 258 --micro-batches 2 --snapshot-dir whole3
go sharded3 sharded.json mpirun 3 --steps 20 --batch 258 --micro-batches 2 --snapshot-dir sharded3
same sharded3 whole3
identical whole3/snapshot-0000000020.h5 sharded3/snapshot-0000000020.h5
echo "ok: sharded snapshots (2 replicas, 2 x 2, 3 replicas) equal the unsharded runs'"

# 2. resumes across shard counts, each to the straight run's hash
go whole30 whole.json --steps 30 --micro-batches 4
go whole40 whole.json --steps 40 --micro-batches 4
go chain10 sharded.json mpirun 2 --steps 10 --micro-batches 2 --snapshot-dir chain
# D = 2 to D = 3 (another batch: as a 3-replica unsharded run resumes the same file)
go to3sharded sharded.json mpirun 3 --steps 20 --batch 258 --micro-batches 2 \
    --resume chain/snapshot-0000000010.h5 --resume-override
go to3whole whole.json mpirun 3 --steps 20 --batch 258 --micro-batches 2 \
    --resume chain/snapshot-0000000010.h5 --resume-override
same to3sharded to3whole
go chain20 sharded.json mpirun 4 --steps 20 --micro-batches 1 --snapshot-dir chain --resume auto
go chain30 sharded.json --steps 30 --micro-batches 4 --snapshot-dir chain --resume auto
go chain40 whole.json mpirun 2 --steps 40 --micro-batches 2 --snapshot-dir chain --resume auto
grep -q "resuming from chain/snapshot-0000000030.h5: step 30" chain40.out ||
    { cat chain40.out; fail "chain40 did not resume step 30"; }
for n in 20 30 40; do same chain$n whole$n; done
go grid40 grid.json mpirun 4 --steps 40 --micro-batches 2 --snapshot-dir grid20 --resume auto
same grid40 whole40
echo "ok: resumed from 2 sharded ranks on 4, on 1 process, on 2 unsharded: the straight hashes"

# 3. exports
expect 0 "exported" "$PIPENET" export sharded20 --out sharded_model.h5
expect 0 "exported" "$PIPENET" export whole20 --out whole_model.h5
identical whole_model.h5 sharded_model.h5

# 4. a damaged snapshot of parts is refused
ls sharded20 | grep -q 'snapshot-0000000020.part-000-001.h5' || fail "no part of replica 1: $(ls sharded20)"
part=snapshot-0000000020.part-000-000.h5
for f in corrupt short missing hostile unchunked; do cp -r sharded20 $f; done
size=$(wc -c <corrupt/$part)
# in the middle of the sharded table's values where h5py says where they are
at=$(/usr/bin/python3 -c 'import sys, h5py
c = h5py.File(sys.argv[1], "r")["params/emb/table"].id.get_chunk_info(0)
print(c.byte_offset + c.size // 2)' corrupt/$part 2>/dev/null) || at=$((size / 2))
printf 'garbage!garbage!' | dd of=corrupt/$part bs=1 seek="$at" conv=notrunc 2>/dev/null
head -c $((size / 2)) sharded20/$part >short/$part
rm missing/$part
(cd hostile && "$fix" relocate snapshot-0000000020.h5 /params/emb/table virtual w.h5) ||
    fail "relocate the index's table"
(cd unchunked && "$fix" relocate snapshot-0000000020.h5 /params/emb/table virtual \
    snapshot-0000000020.part-000-009.h5) || fail "relocate the index's table"
for f in corrupt short missing hostile unchunked; do
    case $f in
    hostile) want="'w.h5' dataset '/params/emb/table', which is not this snapshot's part" ;;
    unchunked) want="part 'snapshot-0000000020.part-000-009.h5' does not hold its values" ;;
    *) want=$part ;;
    esac
    mpirun --oversubscribe -np 2 "$PIPENET" train sharded.json --data ctr/train.h5 --eval= \
        --threads 1 --steps 30 --micro-batches 2 --resume $f/snapshot-0000000020.h5 >$f.out 2>&1 &&
        { cat $f.out; fail "$f was resumed"; }
    grep -q "error: .*$want" $f.out || { cat $f.out; fail "$f: the error does not say '$want'"; }
    grep "error: " $f.out | head -1
    "$PIPENET" export $f/snapshot-0000000020.h5 --out $f-model.h5 >$f.exp 2>&1 &&
        fail "$f was exported"
    grep -q "$want" $f.exp || { cat $f.exp; fail "$f: export does not say '$want'"; }
    "$PIPENET" inspect $f/snapshot-0000000020.h5 >$f.ins 2>&1 && fail "$f: inspect exit 0"
    grep -q "$want" $f.ins || { cat $f.ins; fail "$f: inspect does not say '$want'"; }
done
echo "ok: a corrupted, cut-short or missing part, and an index over other files, are refused"
exit 0

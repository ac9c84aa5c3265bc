#!/bin/sh
# --shard-optimizer (ZeRO stage 1, optim/optimizer_shard.h): each of D replicas keeps
# the optimizer slots of 1/D of its stage's dense parameters and the results do not
# change. On the small DeepFM of shard_fixture.sh (row-sparse tables, whole or sharded
# by rows, and dense fc layers; adam):
#  - --deterministic: the parameter hash of the unsharded 1-process run on 2 replicas,
#    4 replicas (oversubscribed), 2 stages x 2 replicas, --recompute, tables sharded by
#    rows, and with momentum and clipping that bites (clip_norm: the global norm);
#  - without --deterministic (buckets reduced to their pieces' replicas, the norm from
#    the pieces): the per-step losses of the unsharded run within 1e-6 (relative), on 2
#    replicas, and on 4 with momentum and clipping; a tied GPT across 2 stages x 2
#    replicas (whole sums: ties add whole gradients) both ways;
#  - snapshots hold the same content: a sharded run's snapshot resumes unsharded on 1
#    process and sharded on 4 replicas, an unsharded one resumes sharded, D changes at
#    every resume (2 -> 4 -> 1 -> unsharded 2), a tied GPT on 2 stages x 2 replicas
#    resumes both ways, all to the uninterrupted run's hash; h5py reads the index as
#    the unsharded run's file, bit for bit, and each part holds only its replica's 1/D
#    of the dense parameters' slots;
#  - `plan` prints the optimizer slots divided by D for dense parameters;
#  - peak RSS per rank (/usr/bin/time -v) of a model of big fc layers falls by at
#    least 3/4 of what 1/D of its adam slots saves, and under --deterministic by 3/4
#    of that plus the replicas' copies of the arena it no longer holds; with a snapshot
#    after every step still by 3/4 of the slots' saving (no whole slots gathered);
#  - a build with CUDA (the stand-in): on --device cuda the unsharded run's hash, and
#    without --deterministic its losses, over both transports; a sharded snapshot
#    resumed unsharded and on 4 replicas to that hash.
set -u
. "$(dirname "$0")/script_fixture.sh"
. "$(dirname "$0")/shard_fixture.sh" # in $tmp from here on

# go NAME MODEL NP MICRO options...: 40 steps (or $steps) of 64 samples at micro-batches
# of 64 / (replicas x MICRO); NAME.out, NAME.hash, NAME.losses
go() {
    name=$1 model=$2 np=$3 micro=$4
    shift 4
    mpirun --oversubscribe -np "$np" "$PIPENET" train "$model" --data ctr/train.h5 --eval= \
        --steps "${steps:-40}" --micro-batches "$micro" --threads 1 --log-every 1000 --stall-timeout 300 \
        --metrics "$name.jsonl" "$@" >"$name.out" 2>&1 || { cat "$name.out"; fail "$name: exit $?"; }
    sed -n 's/^{"step": \([0-9]*\), .*"loss": \([^,]*\),.*/\1 \2/p' "$name.jsonl" >"$name.losses"
    sed -n "s/^parameter hash after ${steps:-40} steps: //p" "$name.out" >"$name.hash"
    [ -s "$name.hash" ] || { cat "$name.out"; fail "$name: no hash"; }
}
# same NAME REF: NAME's hash is REF's
same() {
    [ "$(cat "$1.hash")" = "$(cat "$2.hash")" ] ||
        fail "$1: hash $(cat "$1.hash"), $2's $(cat "$2.hash")"
    echo "ok: $1 = $2: $(cat "$1.hash")"
}

# 1. --deterministic: bits of the unsharded run on every layout
go ref whole1.json 1 4 --deterministic
go d2 whole1.json 2 2 --deterministic --shard-optimizer
go d4 whole1.json 4 1 --deterministic --shard-optimizer
go grid whole.json 4 2 --deterministic --shard-optimizer
go recompute whole1.json 2 2 --deterministic --shard-optimizer --recompute
for run in d2 d4 grid recompute; do same $run ref; done
grep -q '^optimizer slots: sharded over 2 replicas' d2.out || { cat d2.out; fail "d2: no sharding line"; }
grep -q '^optimizer slots: sharded' ref.out && fail "ref: sharded on one process"
go one_sharded whole1.json 1 4 --deterministic --shard-optimizer
same one_sharded ref
grep -q '^optimizer slots: whole (--shard-optimizer shards them over 2 or more replicas' \
    one_sharded.out || { cat one_sharded.out; fail "one_sharded: no note"; }
go rows_ref shard1.json 1 4 --deterministic
go rows shard1.json 2 2 --deterministic --shard-optimizer
same rows rows_ref
grep -q 'shard_optimizer' whole1.json && fail "fixture already sets shard_optimizer"
sed 's/"train": {/"train": {"shard_optimizer": true, /' whole1.json >key.json
go key key.json 2 2 --deterministic
same key ref
grep -q '^optimizer slots: sharded over 2 replicas' key.out || { cat key.out; fail "key: not sharded"; }

# momentum with a clip that bites: the global norm is the unsharded one
sed 's/"optimizer": {[^}]*}/"optimizer": {"type": "momentum", "lr": 0.05, "clip_norm": 0.05}/' \
    whole1.json >clip.json
grep -q clip_norm clip.json || fail "no clip_norm in clip.json"
sed 's/, "clip_norm": 0.05//' clip.json >noclip.json
go clip_ref clip.json 1 4 --deterministic
go noclip noclip.json 1 4 --deterministic
[ "$(cat clip_ref.hash)" != "$(cat noclip.hash)" ] || fail "clip_norm 0.05 changed nothing"
go clip clip.json 2 2 --deterministic --shard-optimizer
same clip clip_ref

# 2. without --deterministic each bucket is summed on the replicas whose pieces it
# covers (a reduce-scatter), the norm from the pieces: the unsharded run's losses
# close_losses A B: 40 step losses, each within 1e-6 (relative)
close_losses() {
    [ "$(wc -l <"$2.losses")" -eq 40 ] || fail "$2: not 40 losses"
    paste "$1.losses" "$2.losses" | awk '{
        d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
        if ($1 != $3 || d > 1e-6 * m) { print "step " $1 ": " $2 " vs " $4; bad = 1 } }
        END { exit bad }' || fail "$1: losses differ from $2's"
    echo "ok: $1: 40 losses within 1e-6 of $2's"
}
go buckets_sharded whole1.json 2 2 --shard-optimizer
go buckets whole1.json 2 2
close_losses buckets_sharded buckets
grep -q "gradients reduced to their pieces' replicas" buckets_sharded.out ||
    { cat buckets_sharded.out; fail "buckets_sharded: gradients not reduced in pieces"; }
grep -q "gradients added in the fixed tree piece by piece" d2.out ||
    { cat d2.out; fail "d2: not added piece by piece"; }
go buckets4_sharded clip.json 4 1 --shard-optimizer
go buckets4 clip.json 4 1
close_losses buckets4_sharded buckets4

# tied tables (their uses' gradients are summed whole, ties.h): a tiny GPT whose
# logits use the embedding's table, on 2 replicas x 2 stages, adamw with clipping
. "$fixtures/lm_fixture.sh"
import_times_table 400
tiny_gpt 256 '{"batch": 16, "steps": 40, "seed": 3,
    "optimizer": {"type": "adamw", "lr": 0.01, "weight_decay": 0.1, "clip_norm": 0.5}}' \
    ', "tie": "embed"' >tied.json
tied() { # tied NAME NP MICRO options: like go, on the tiny GPT
    name=$1 np=$2 micro=$3
    shift 3
    mpirun --oversubscribe -np "$np" "$PIPENET" train tied.json --data lm/train.h5 --eval= \
        --micro-batches "$micro" --threads 1 --log-every 1000 --metrics "$name.jsonl" "$@" \
        >"$name.out" 2>&1 || { cat "$name.out"; fail "$name: exit $?"; }
    sed -n 's/^{"step": \([0-9]*\), .*"loss": \([^,]*\),.*/\1 \2/p' "$name.jsonl" >"$name.losses"
    sed -n 's/^parameter hash after 40 steps: //p' "$name.out" >"$name.hash"
}
tied tied_ref 1 4 --deterministic
tied tied_grid 4 2 --stages 2 --deterministic --shard-optimizer
same tied_grid tied_ref
grep -q "gradients added in the fixed tree piece by piece" tied_grid.out ||
    { cat tied_grid.out; fail "tied_grid: not added piece by piece"; }
tied tied_buckets_sharded 4 2 --stages 2 --shard-optimizer
tied tied_buckets 4 2 --stages 2
close_losses tied_buckets_sharded tied_buckets
grep -q "gradients summed whole" tied_buckets_sharded.out ||
    { cat tied_buckets_sharded.out; fail "tied_buckets_sharded: not summed whole"; }

# 3. snapshots: sharded <-> unsharded resume to the uninterrupted hash; each replica
# writes only its own run of the slots into its own part and reads back only its own
go snap_d2 whole1.json 2 2 --deterministic --shard-optimizer --snapshot-dir s2 --snapshot-every 20
same snap_d2 ref
go from_d2_one whole1.json 1 4 --deterministic --resume s2/snapshot-0000000020.h5
go from_d2_d4 whole1.json 4 1 --deterministic --shard-optimizer --resume s2/snapshot-0000000020.h5
go snap_one whole1.json 1 4 --deterministic --snapshot-dir s1 --snapshot-every 20
go from_one_d2 whole1.json 2 2 --deterministic --shard-optimizer --resume s1/snapshot-0000000020.h5
for run in from_d2_one from_d2_d4 from_one_d2; do same $run ref; done
# D changing at every resume: 2 -> 4 -> 1 -> unsharded on 2, 10 steps each
every="--snapshot-dir m --snapshot-every 10 --keep 9"
steps=10
go m10 whole1.json 2 2 --deterministic --shard-optimizer $every
steps=20
go m20 whole1.json 4 1 --deterministic --shard-optimizer $every --resume auto
steps=30
go m30 whole1.json 1 4 --deterministic --shard-optimizer $every --resume auto
steps=40
go m40 whole1.json 2 2 --deterministic $every --resume auto
grep -q 'resuming from m/snapshot-0000000030.h5' m40.out || { cat m40.out; fail "m40: not resumed at 30"; }
same m40 ref
# a failed save (a fault in replica 1's part, which only its run of the slots makes
# a writer) keeps the snapshot of step 10 and leaves nothing of step 20; the run
# resumed from it ends on the uninterrupted hash, and keep-K leaves 2 snapshots with
# their parts and no part without its index
steps=10
go f10 whole1.json 2 2 --deterministic --shard-optimizer --snapshot-dir f --snapshot-every 10 --keep 2
PIPENET_FAULT=1:part mpirun --oversubscribe -np 2 "$PIPENET" train whole1.json --data ctr/train.h5 \
    --eval= --steps 20 --micro-batches 2 --threads 1 --log-every 1000 --deterministic \
    --shard-optimizer --snapshot-dir f --snapshot-every 10 --keep 2 --resume auto >f20.out 2>&1 &&
    { cat f20.out; fail "f20: the fault in replica 1's part did not fail the run"; }
grep -q "PIPENET_FAULT at" f20.out || { cat f20.out; fail "f20: no fault"; }
grep -q "snapshot at step 20 (the snapshots already in f are kept)" f20.out ||
    { cat f20.out; fail "f20: no word of the failed snapshot"; }
ls f | grep -q 0000000020 && fail "f20: left $(ls f | grep 0000000020)"
"$PIPENET" inspect f/snapshot-0000000010.h5 | grep -q "every checksum verified" ||
    fail "f20: the snapshot of step 10 does not verify"
steps=40
go f40 whole1.json 2 2 --deterministic --shard-optimizer --snapshot-dir f --snapshot-every 10 --keep 2 --resume auto
grep -q 'resuming from f/snapshot-0000000010.h5' f40.out || { cat f40.out; fail "f40: not resumed at 10"; }
same f40 ref
[ "$(ls f | grep -c '^snapshot-[0-9]*\.h5$')" -eq 2 ] && [ "$(ls f | grep -c '\.part-000-00[01]\.h5$')" -eq 4 ] &&
    [ -f f/snapshot-0000000040.part-000-001.h5 ] && [ -f f/snapshot-0000000030.part-000-001.h5 ] ||
    fail "keep 2: $(ls f)"
echo "ok: a failed sharded save keeps step 10; keep 2 keeps 2 snapshots and their 4 parts"
# tables sharded by rows: each owner writes its rows with their slots, beside its run
# of the dense slots, and the snapshot resumes on 4 replicas (4 owners) and unsharded
go rows_snap shard1.json 2 2 --deterministic --shard-optimizer --snapshot-dir rs --snapshot-every 20
go rows_d4 shard1.json 4 1 --deterministic --shard-optimizer --resume rs/snapshot-0000000020.h5
go rows_one shard1.json 1 4 --deterministic --resume rs/snapshot-0000000020.h5
for run in rows_snap rows_d4 rows_one; do same $run rows_ref; done
# tied tables across 2 stages x 2 replicas: a tied copy's slots are its table's
tied tied_snap 4 2 --stages 2 --deterministic --shard-optimizer --snapshot-dir ts --snapshot-every 20
tied tied_from 1 4 --deterministic --resume ts/snapshot-0000000020.h5
tied tied_back 4 2 --stages 2 --deterministic --shard-optimizer --resume ts/snapshot-0000000020.h5
for run in tied_snap tied_from tied_back; do same $run tied_ref; done
# the same content: every value equal (inspect --compare reads the values), and
# the same table of each parameter's values and slots (their norms)
"$PIPENET" inspect s2/snapshot-0000000040.h5 --compare s1/snapshot-0000000040.h5 >cmp.txt 2>&1 ||
    { cat cmp.txt; fail "the sharded run's snapshot differs from the unsharded one's"; }
"$PIPENET" inspect s2/snapshot-0000000040.h5 >s2.txt 2>&1 || { cat s2.txt; fail "inspect s2"; }
"$PIPENET" inspect s1/snapshot-0000000040.h5 >s1.txt 2>&1 || { cat s1.txt; fail "inspect s1"; }
grep -q '|adam_v|' s2.txt || { cat s2.txt; fail "no adam_v slot in the sharded run's snapshot"; }
grep '|' s1.txt >s1.body # the table (the header says version 1 or 2)
grep '|' s2.txt | diff - s1.body || fail "the snapshots' slots differ (above: sharded <, unsharded >)"
echo "ok: step-40 snapshots of the sharded and unsharded runs are equal"
# through h5py: the sharded index holds the unsharded file's datasets, bit for bit, and
# each part only its replica's run of the dense parameters' slots (1/D of them: no
# replica wrote a whole slot); the row-sparse tables' slots whole in replica 0's
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
    for d in 2 4; do
        case $d in 2) idx=s2/snapshot-0000000040.h5 ref1=s1/snapshot-0000000040.h5 ;;
                   4) idx=m/snapshot-0000000020.h5 ref1=s1/snapshot-0000000020.h5 ;; esac
        /usr/bin/python3 - "$idx" "$ref1" $d <<'PY' >h5_$d.txt 2>&1 || { cat h5_$d.txt; fail "h5py check, D = $d"; }
import sys, glob, h5py, numpy as np
index, one, d = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), int(sys.argv[3])
def arrays(f):
    out = {}
    f.visititems(lambda n, o: out.__setitem__(n, o) if isinstance(o, h5py.Dataset) else None)
    return out
x, y = arrays(one), arrays(index)
assert sorted(x) == sorted(y), (sorted(x), sorted(y))
assert index.attrs["version"] == 2 and index.attrs["parts"] == d, dict(index.attrs)
bad = [n for n in x if x[n].shape != y[n].shape or x[n][()].tobytes() != y[n][()].tobytes()]
assert not bad, bad
slots = [n for n in y if n.startswith("optimizer/")]
dense = [n for n in slots if n.split("/")[1] in ("d1", "deep")]
assert len(dense) == 8, dense # d1 and deep, w and b, adam_m and adam_v
total = sum(y[n].size for n in dense)
parts = sorted(glob.glob(sys.argv[1][:-3] + ".part-000-*.h5"))
assert len(parts) == d, parts
held = []
for r, path in enumerate(parts):
    p = arrays(h5py.File(path, "r"))
    mine = [n for n in p if n in dense]
    got = sum(p[n].size for n in mine)
    held.append(got)
    # its piece of the gradient buffer: 1/D of it, 16-float aligned
    assert got <= total / d + 2 * 16 * 2, (path, got, total)
    assert all(p[n].ndim == 1 for n in mine), (path, [(n, p[n].shape) for n in mine])
    # d1/w, 208 x 32 of the 6721 dense values, spans every piece: cut in each part
    assert all(p[n].size < y[n].size for n in mine if n.startswith("optimizer/d1/w/")), path
    tables = [n for n in p if n in slots and n not in dense]
    assert (r == 0) == bool(tables), (path, tables) # the tables' slots: replica 0's
    assert (r == 0) == any(n.startswith("params/") for n in p), path # the values too
    print("%s: %d of %d dense slot values" % (path, got, total))
assert sum(held) == total, (held, total)
PY
        cat h5_$d.txt
    done
    echo "ok: h5py: the indexes hold the unsharded run's slots; each part 1/D of the dense slots"
else
    echo "note: /usr/bin/python3 has no h5py: the index and the parts are not checked through h5py"
fi

# 4. plan: opt slots of the dense parameters divided by D
"$PIPENET" plan whole1.json --replicas 2 --micro-batches 2 --measure --repeat 3 \
    --save-times t.json >plan0 2>&1 || { cat plan0; fail "plan --measure"; }
slots_of() { sed -n 's/^ *"slot_bytes": \([0-9.]*\).*/\1/p' "$1" | head -1; }
"$PIPENET" plan whole1.json --replicas 2 --micro-batches 2 --layer-times t.json --json \
    >plan1 2>&1 || { cat plan1; fail "plan"; }
"$PIPENET" plan whole1.json --replicas 2 --micro-batches 2 --layer-times t.json --json \
    --shard-optimizer >plan2 2>&1 || { cat plan2; fail "plan --shard-optimizer"; }
whole=$(slots_of plan1) sharded=$(slots_of plan2)
[ -n "$whole" ] && [ -n "$sharded" ] || { cat plan1 plan2; fail "no slot_bytes"; }
# the dense parameters, 208 x 32 + 32 + 32 + 1 floats: adam's 2 slots of half of them
awk -v w="$whole" -v s="$sharded" 'BEGIN { half = 2 * 4 * 6721 / 2
    exit !(w - s > 0.99 * half && w - s < 1.01 * half) }' ||
    fail "plan: opt slots $whole bytes unsharded, $sharded sharded"
echo "ok: plan: opt slots $whole -> $sharded bytes on 2 replicas"

# 5. peak RSS per rank on big dense layers: adam's slots of fc layers of 2048 x 2048
sed -e 's/{"name": "d1", "type": "fc", "input": "flat", "size": 32, "act": "relu"}/{"name": "d1", "type": "fc", "input": "flat", "size": 2048, "act": "relu"}, {"name": "b1", "type": "fc", "input": "d1", "size": 2048, "act": "relu"}, {"name": "b2", "type": "fc", "input": "b1", "size": 2048, "act": "relu"}, {"name": "b3", "type": "fc", "input": "b2", "size": 32, "act": "relu"}/' \
    -e 's/"input": "d1", "size": 1}/"input": "b3", "size": 1}/' whole1.json >big.json
grep -q '"input": "b3", "size": 1}' big.json || fail "big.json: no big layers"
rss() { # rss NAME options: NAME.rss, the largest peak RSS of the 2 ranks (KiB)
    name=$1
    shift
    mpirun --oversubscribe -np 2 /usr/bin/time -v "$PIPENET" train big.json --data ctr/train.h5 \
        --eval= --steps 2 --threads 1 "$@" >"$name.out" 2>&1 ||
        { cat "$name.out"; fail "$name: exit $?"; }
    awk '/Maximum resident set size/ { if ($6 > m) m = $6 } END { print m }' "$name.out" \
        >"$name.rss"
}
rss rss_whole
rss rss_sharded --shard-optimizer
rss_whole=$(cat rss_whole.rss) rss_sharded=$(cat rss_sharded.rss)
# 2 slots x (208 x 2048 + 2 x 2048 x 2048 + 2048 x 32) floats, half of them kept
saved_kib=$(( 2 * (208 * 2048 + 2 * 2048 * 2048 + 2048 * 32) * 4 / 2 / 1024 ))
echo "peak RSS per rank: $rss_whole KiB unsharded, $rss_sharded KiB sharded (slots / 2 = $saved_kib KiB)"
[ $((rss_whole - rss_sharded)) -gt $((saved_kib * 3 / 4)) ] ||
    fail "peak RSS fell by $((rss_whole - rss_sharded)) KiB, expected about $saved_kib"
echo "ok: peak RSS fell by $((rss_whole - rss_sharded)) KiB"
# with a snapshot after each step: each replica writes its own run of the slots from
# where it keeps it, so the peak stays as low (no whole slot gathered for the save)
rss rss_snap --shard-optimizer --snapshot-dir big_s --snapshot-every 1
rss_snap=$(cat rss_snap.rss)
ls big_s | grep -q 'snapshot-0000000002.part-000-001.h5' || fail "big_s: no part of replica 1: $(ls big_s)"
echo "with snapshots: $rss_snap KiB sharded ($rss_sharded without, $rss_whole unsharded)"
[ $((rss_whole - rss_snap)) -gt $((saved_kib * 3 / 4)) ] ||
    fail "with snapshots the peak RSS fell by $((rss_whole - rss_snap)) KiB only, expected about $saved_kib"
echo "ok: with snapshots peak RSS still fell by $((rss_whole - rss_snap)) KiB"
# --deterministic: besides the slots, D copies of a piece instead of D of the arena
rss rss_det_whole --deterministic
rss rss_det_sharded --deterministic --shard-optimizer
rss_whole=$(cat rss_det_whole.rss) rss_sharded=$(cat rss_det_sharded.rss)
echo "--deterministic: $rss_whole KiB unsharded, $rss_sharded KiB sharded (slots / 2 + 1 arena: $((2 * saved_kib)) KiB)"
[ $((rss_whole - rss_sharded)) -gt $((2 * saved_kib * 3 / 4)) ] ||
    fail "--deterministic: peak RSS fell by $((rss_whole - rss_sharded)) KiB, expected about $((2 * saved_kib))"
echo "ok: --deterministic: peak RSS fell by $((rss_whole - rss_sharded)) KiB"

# 6. CUDA (the stand-in, or GPUs): both transports, the unsharded hash
if "$PIPENET" train whole1.json --data ctr/train.h5 --eval= --steps 1 --device cuda \
    >probe 2>&1; then
    # the GPU kernels' bits are their own: the unsharded run on them is the reference
    go cuda_ref whole1.json 2 2 --deterministic --device cuda --transport mpi
    # snapshots from and into the GPU's slot parts (through the staging buffer)
    go cuda_snap whole1.json 2 2 --deterministic --device cuda --transport mpi \
        --shard-optimizer --snapshot-dir cs --snapshot-every 20
    go cuda_whole whole1.json 2 2 --deterministic --device cuda --transport mpi \
        --resume cs/snapshot-0000000020.h5
    go cuda_d4 whole1.json 4 1 --deterministic --device cuda --transport mpi \
        --shard-optimizer --resume cs/snapshot-0000000020.h5
    for run in cuda_snap cuda_whole cuda_d4; do same $run cuda_ref; done
    for t in mpi nccl; do
        if [ $t = nccl ] && grep -q "without NCCL" probe; then continue; fi
        # one GPU for both ranks (the device machines lent here): NCCL refuses, rightly
        if [ $t = nccl ] && ! mpirun --oversubscribe -np 2 "$PIPENET" train whole1.json \
            --data ctr/train.h5 --eval= --steps 1 --device cuda --transport nccl \
            >probe_nccl 2>&1 && grep -q "share GPU" probe_nccl; then
            echo "(no nccl case: $(grep -m1 -o 'ranks 0 and 1 share GPU [0-9]*' probe_nccl))"
            continue
        fi
        go cuda_$t whole1.json 2 2 --deterministic --device cuda --transport $t --shard-optimizer
        same cuda_$t cuda_ref
        go cuda_buckets_$t whole1.json 2 2 --device cuda --transport $t
        go cuda_buckets_sharded_$t whole1.json 2 2 --device cuda --transport $t --shard-optimizer
        close_losses cuda_buckets_sharded_$t cuda_buckets_$t
        grep -q "gradients reduced to their pieces' replicas" cuda_buckets_sharded_$t.out ||
            { cat cuda_buckets_sharded_$t.out; fail "cuda $t: gradients not reduced in pieces"; }
    done
else
    echo "no CUDA case: $(grep -m1 error probe)"
fi

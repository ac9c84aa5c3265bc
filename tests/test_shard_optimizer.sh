#!/bin/sh
# --shard-optimizer (ZeRO stage 1, pipeline/optimizer_shard.h): each of D replicas keeps
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
#    process and sharded on 4 replicas, an unsharded one resumes sharded, all to the
#    uninterrupted run's hash;
#  - `plan` prints the optimizer slots divided by D for dense parameters;
#  - peak RSS per rank (/usr/bin/time -v) of a model of big fc layers falls by at
#    least 3/4 of what 1/D of its adam slots saves, and under --deterministic by 3/4
#    of that plus the replicas' copies of the arena it no longer holds;
#  - a build with CUDA (the stand-in): on --device cuda the unsharded run's hash, and
#    without --deterministic its losses, over both transports.
set -u
. "$(dirname "$0")/script_fixture.sh"
. "$(dirname "$0")/shard_fixture.sh" # in $tmp from here on

# go NAME MODEL NP MICRO options...: 40 steps of 64 samples at micro-batches of
# 64 / (replicas x MICRO); NAME.out, NAME.hash, NAME.losses
go() {
    name=$1 model=$2 np=$3 micro=$4
    shift 4
    mpirun --oversubscribe -np "$np" "$PIPENET" train "$model" --data ctr/train.h5 --eval= \
        --steps 40 --micro-batches "$micro" --threads 1 --log-every 1000 --stall-timeout 300 \
        --metrics "$name.jsonl" "$@" >"$name.out" 2>&1 || { cat "$name.out"; fail "$name: exit $?"; }
    sed -n 's/^{"step": \([0-9]*\), .*"loss": \([^,]*\),.*/\1 \2/p' "$name.jsonl" >"$name.losses"
    sed -n 's/^parameter hash after 40 steps: //p' "$name.out" >"$name.hash"
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
times_table 400 >text.txt
"$PIPENET" import text text.txt --out lm --seq 16 >/dev/null || fail "import text"
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

# 3. snapshots: sharded <-> unsharded resume to the uninterrupted hash
go snap_d2 whole1.json 2 2 --deterministic --shard-optimizer --snapshot-dir s2 --snapshot-every 20
same snap_d2 ref
go from_d2_one whole1.json 1 4 --deterministic --resume s2/snapshot-0000000020.h5
go from_d2_d4 whole1.json 4 1 --deterministic --shard-optimizer --resume s2/snapshot-0000000020.h5
go snap_one whole1.json 1 4 --deterministic --snapshot-dir s1 --snapshot-every 20
go from_one_d2 whole1.json 2 2 --deterministic --shard-optimizer --resume s1/snapshot-0000000020.h5
for run in from_d2_one from_d2_d4 from_one_d2; do same $run ref; done
# the same content: every value equal (inspect --compare reads the values), and
# the same table of each parameter's values and slots (their norms)
"$PIPENET" inspect s2/snapshot-0000000040.h5 --compare s1/snapshot-0000000040.h5 >cmp.txt 2>&1 ||
    { cat cmp.txt; fail "the sharded run's snapshot differs from the unsharded one's"; }
"$PIPENET" inspect s2/snapshot-0000000040.h5 >s2.txt 2>&1 || { cat s2.txt; fail "inspect s2"; }
"$PIPENET" inspect s1/snapshot-0000000040.h5 >s1.txt 2>&1 || { cat s1.txt; fail "inspect s1"; }
grep -q '|adam_v|' s2.txt || { cat s2.txt; fail "no adam_v slot in the sharded run's snapshot"; }
sed 1d s1.txt >s1.body # all but the file's name
sed 1d s2.txt | diff - s1.body || fail "the snapshots' slots differ (above: sharded <, unsharded >)"
echo "ok: step-40 snapshots of the sharded and unsharded runs are equal"

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

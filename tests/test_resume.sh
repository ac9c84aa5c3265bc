#!/bin/sh
# Snapshots and resume end to end on Fashion-MNIST (skips, 77, without the Debian
# package): N steps straight vs N/2, snapshot, resume, N/2 give identical losses and
# parameter hash; a snapshot written by a 2-stage pipeline resumes on one process
# and on 2 replicas x 2 stages along the same trajectory (bit-exact with
# --deterministic), and so does one written under the interleaved schedule, which
# resumes the 2-stage one in turn; --resume auto and --resume DIR skip a corrupted newest
# snapshot, as export does; the snapshot's
# seed and batch carry over, and a different seed, batch or network is refused
# unless --resume-override (with another batch, the data position is counted in the
# new batches); --resume auto starts fresh before the first snapshot.
# (Stop signals: test_signals.sh.)
set -u
. "$(dirname "$0")/script_fixture.sh"
import_fashion_mnist
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json

# train NP NAME [options]: 40 steps of batch 64 on NP ranks, output in $tmp/NAME.out
train() {
    np=$1 name=$2; shift 2
    mpirun --oversubscribe -np "$np" "$PIPENET" train "$model" --data "$tmp/fm/train.h5" \
        --eval "$tmp/fm/test.h5" --steps 40 --batch 64 --threads 1 --log-every 1000 \
        --metrics "$tmp/$name.jsonl" "$@" >"$tmp/$name.out" 2>&1 ||
        { cat "$tmp/$name.out"; fail "$name exited non-zero"; }
}
hash_of() { grep -o 'parameter hash after 40 steps: [0-9a-f]*' "$tmp/$1.out" | cut -d' ' -f6; }
losses_after_20() { grep -o '"step": [0-9]*, "epoch": [0-9]*, "loss": [^,]*' "$tmp/$1.jsonl" |
                    awk -F'[ ,]+' '$2 > 20 { print $2, $6 }'; }

# 1. same layout: straight, and resumed from the straight run's step-20 snapshot
train 2 straight --stages 2 --snapshot-dir "$tmp/snap" --snapshot-every 20
snap20=$tmp/snap/snapshot-0000000020.h5
[ -f "$snap20" ] || fail "no snapshot at step 20 in $tmp/snap: $(ls "$tmp/snap")"
train 2 resumed --stages 2 --resume "$snap20"
grep -q "resuming from $snap20: step 20" "$tmp/resumed.out" || fail "resume message: $(head -3 "$tmp/resumed.out")"
[ -n "$(hash_of straight)" ] || fail "no hash in the straight run"
[ "$(hash_of straight)" = "$(hash_of resumed)" ] || fail "resumed hash $(hash_of resumed) != $(hash_of straight)"
[ "$(losses_after_20 straight)" = "$(losses_after_20 resumed)" ] || fail "resumed losses differ"
echo "ok: 40 straight = 20 + resume + 20 (P=2), hash $(hash_of straight)"
# resumed into the interrupted run's own metrics file (all 40 steps, then a line cut
# short by a kill): the lines past step 20 and the cut one go, each step is there
# once, and steps 21..40 are the resumed run's
cp "$tmp/straight.jsonl" "$tmp/into.jsonl"
printf '{"step": 41, "epo' >>"$tmp/into.jsonl"
train 2 into --stages 2 --resume "$snap20"
grep -q "^metrics: dropped [0-9]* lines past step 20 from $tmp/into.jsonl" "$tmp/into.out" ||
    fail "no word of the dropped metrics lines: $(head -5 "$tmp/into.out")"
python3 - "$tmp/into.jsonl" "$tmp/straight.jsonl" "$tmp/resumed.jsonl" <<'PY' || fail "metrics after resuming into the same file"
import json, sys
into, straight, resumed = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
steps = [r["step"] for r in into if "loss" in r]
assert steps == list(range(1, 41)), steps
tail = lambda rows: [r for r in rows if r["step"] > 20 and "loss" in r]
assert [r["loss"] for r in tail(into)] == [r["loss"] for r in tail(resumed)]
assert [r for r in into if r["step"] <= 20] == [r for r in straight if r["step"] <= 20]
PY
echo "ok: resuming into the interrupted run's metrics file keeps each step once"

# 2. another layout resumes the P=2 snapshot: one process, and 2 replicas x 2 stages
train 1 onep --stages 1 --micro-batches 4 --resume "$snap20"
train 4 dp2pp2 --stages 2 --micro-batches 2 --resume "$snap20"
for run in onep dp2pp2; do
    losses_after_20 straight >"$tmp/a"
    losses_after_20 "$run" >"$tmp/b"
    [ "$(wc -l <"$tmp/b")" -eq 20 ] || fail "$run: $(wc -l <"$tmp/b") losses after step 20"
    paste "$tmp/a" "$tmp/b" | awk -v run="$run" '{ d = ($2 - $4) / $2; if (d < 0) d = -d;
        if (d > m) m = d } END { printf "ok: %s resumed the P=2 snapshot, max relative loss difference %.3g\n", run, m;
        exit m > 1e-5 }' || fail "$run drifted from the straight run"
done

# 3. --deterministic: bit-exact across layouts with micro-batches of 16
train 2 dstraight --stages 2 --micro-batches 4 --deterministic --snapshot-dir "$tmp/dsnap" --snapshot-every 20
train 1 done --stages 1 --micro-batches 4 --deterministic --resume "$tmp/dsnap/snapshot-0000000020.h5"
train 4 ddp --stages 2 --micro-batches 2 --deterministic --resume "$tmp/dsnap/snapshot-0000000020.h5"
for run in done ddp; do
    [ "$(hash_of dstraight)" = "$(hash_of $run)" ] || fail "deterministic $run: hash $(hash_of $run) != $(hash_of dstraight)"
done
echo "ok: --deterministic resume on P=1 and D=2,P=2: hash $(hash_of dstraight) in all three"

# 3a. file versions (docs/formats.md): one process writes one file (version 1), two
# stages an index over a part per stage (version 2, h5py reads it as one file, the
# same datasets and bytes as the version 1 file of the same trajectory); the version
# 1 file resumes on 2 stages and on 2 x 2, bit-exact
train 1 d1straight --stages 1 --micro-batches 4 --deterministic --snapshot-dir "$tmp/d1snap" --snapshot-every 20
[ "$(hash_of dstraight)" = "$(hash_of d1straight)" ] || fail "one process: hash $(hash_of d1straight) != $(hash_of dstraight)"
ls "$tmp/d1snap" | grep -q part && fail "one process wrote parts: $(ls "$tmp/d1snap")"
[ -f "$tmp/dsnap/snapshot-0000000020.part-000-000.h5" ] && [ -f "$tmp/dsnap/snapshot-0000000020.part-001-000.h5" ] ||
    fail "2 stages: no part per stage: $(ls "$tmp/dsnap")"
expect 0 "version 1 " "$PIPENET" inspect "$tmp/d1snap/snapshot-0000000020.h5"
expect 0 "version 2 " "$PIPENET" inspect "$tmp/dsnap/snapshot-0000000020.h5"
train 2 dv1p2 --stages 2 --micro-batches 4 --deterministic --resume "$tmp/d1snap/snapshot-0000000020.h5"
train 4 dv1dp --stages 2 --micro-batches 2 --deterministic --resume "$tmp/d1snap/snapshot-0000000020.h5"
for run in dv1p2 dv1dp; do
    [ "$(hash_of dstraight)" = "$(hash_of $run)" ] || fail "version 1 on $run: hash $(hash_of $run) != $(hash_of dstraight)"
done
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
    (cd / && /usr/bin/python3 - "$tmp/d1snap/snapshot-0000000020.h5" "$tmp/dsnap/snapshot-0000000020.h5") <<'PY' || fail "h5py: the index does not read as the version 1 file"
import sys, h5py
one, index = (h5py.File(p, "r") for p in sys.argv[1:3])
assert one.attrs["version"] == 1 and index.attrs["version"] == 2 and index.attrs["parts"] == 2
def arrays(f):
    out = {}
    f.visititems(lambda n, o: out.__setitem__(n, o) if isinstance(o, h5py.Dataset) else None)
    return out
x, y = arrays(one), arrays(index)
assert sorted(x) == sorted(y) and len(x) == 18, (sorted(x), sorted(y))
assert all(y[n].is_virtual and not x[n].is_virtual for n in x)
bad = [n for n in x if x[n][()].tobytes() != y[n][()].tobytes()]
assert not bad, bad
PY
    echo "ok: h5py reads the index (from another directory) as the version 1 file"
else
    echo "note: /usr/bin/python3 has no h5py: the index is not compared through h5py"
fi
echo "ok: one process writes version 1, 2 stages version 2; version 1 resumes on P=2 and 2 x 2: hash $(hash_of dstraight)"

# 3b. the interleaved schedule (2 stages x 2 virtual stages: 4 chunks, 2 per rank):
# its snapshot resumes on one process, and it resumes the 2-stage run's, bit-exact
train 2 istraight --stages 2 --schedule interleaved --virtual-stages 2 --micro-batches 4 \
    --deterministic --snapshot-dir "$tmp/isnap" --snapshot-every 20
train 1 ione --stages 1 --micro-batches 4 --deterministic --resume "$tmp/isnap/snapshot-0000000020.h5"
train 2 iresumed --stages 2 --schedule interleaved --micro-batches 4 --deterministic \
    --resume "$tmp/dsnap/snapshot-0000000020.h5"
for run in istraight ione iresumed; do
    [ "$(hash_of dstraight)" = "$(hash_of $run)" ] || fail "interleaved $run: hash $(hash_of $run) != $(hash_of dstraight)"
done
echo "ok: interleaved (P=2, V=2) straight, its snapshot on P=1, and resuming P=2's: hash $(hash_of dstraight)"

# 4. a corrupted newest snapshot: resume auto takes the one before, naming it
mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" --stages 2 \
    --steps 30 --batch 64 --threads 1 --log-every 1000 --snapshot-dir "$tmp/corrupt" \
    --snapshot-every 10 >/dev/null 2>&1 || fail "corrupt: first run"
newest=$tmp/corrupt/snapshot-0000000030.h5
size=$(wc -c <"$newest")
printf 'garbage!garbage!' | dd of="$newest" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
cp -r "$tmp/corrupt" "$tmp/corrupt_dir" # for --resume DIR, below: the auto run replaces 30
mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" --stages 2 \
    --steps 40 --batch 64 --threads 1 --log-every 1000 --snapshot-dir "$tmp/corrupt" \
    --resume auto >"$tmp/auto.out" 2>&1 || { cat "$tmp/auto.out"; fail "resume auto exited non-zero"; }
grep -q "resuming from $tmp/corrupt/snapshot-0000000020.h5: step 20" "$tmp/auto.out" ||
    { cat "$tmp/auto.out"; fail "resume auto did not fall back to step 20"; }
grep -q "warning: .*skipped newer snapshots that do not verify: $newest" "$tmp/auto.out" ||
    { cat "$tmp/auto.out"; fail "resume auto skipped the corrupted snapshot silently"; }
"$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" --steps 40 --resume "$newest" >"$tmp/bad.out" 2>&1 &&
    fail "a corrupted snapshot was accepted"
grep -q "snapshot-0000000030.h5" "$tmp/bad.out" || fail "the corrupted snapshot is not named: $(cat "$tmp/bad.out")"
echo "ok: resume auto skipped the corrupted newest snapshot; resuming it directly is refused"
# --resume DIR reads the directory as export and infer do: its newest valid snapshot
mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" --stages 2 \
    --steps 40 --batch 64 --threads 1 --log-every 1000 --resume "$tmp/corrupt_dir" >"$tmp/dir.out" 2>&1 ||
    { cat "$tmp/dir.out"; fail "--resume DIR exited non-zero"; }
grep -q "resuming from $tmp/corrupt_dir/snapshot-0000000020.h5: step 20" "$tmp/dir.out" ||
    { cat "$tmp/dir.out"; fail "--resume DIR did not take the newest valid snapshot (step 20)"; }
grep -q "warning: .*skipped newer snapshots that do not verify: $tmp/corrupt_dir/snapshot-0000000030.h5" \
    "$tmp/dir.out" || { cat "$tmp/dir.out"; fail "--resume DIR skipped the corrupted snapshot silently"; }
"$PIPENET" export "$tmp/corrupt_dir" --out "$tmp/dir_model.h5" >"$tmp/dir_export.out" 2>&1 ||
    fail "export of the directory: $(cat "$tmp/dir_export.out")"
grep -q "^exported $tmp/corrupt_dir/snapshot-0000000020.h5 " "$tmp/dir_export.out" ||
    fail "export took another snapshot than --resume DIR: $(cat "$tmp/dir_export.out")"
auto_hash=$(grep -o 'parameter hash after 40 steps: [0-9a-f]*' "$tmp/auto.out")
[ -n "$auto_hash" ] && grep -q "$auto_hash" "$tmp/dir.out" ||
    fail "--resume DIR and --resume auto from the same snapshot end differently"
echo "ok: --resume DIR takes the snapshot export takes (step 20, the corrupted 30 skipped)"

# 5. the snapshot's settings, on one process with a small model: batches of 10000
# (6 steps an epoch), so that a resume at step 4 crosses into the second epoch
cat >"$tmp/small.json" <<EOF
{"name": "small", "inputs": {"x": {"dataset": "features", "size": 784},
                             "y": {"dataset": "labels", "ids": true}},
 "layers": [{"name": "h", "type": "fc", "input": "x", "size": 16, "act": "relu"},
            {"name": "out", "type": "fc", "input": "h", "size": 10},
            {"name": "loss", "type": "softmax_xent", "input": ["out", "y"]}],
 "train": {"batch": 64, "seed": 1, "optimizer": {"type": "adam", "lr": 0.01}}}
EOF
sed 's/"size": 16, "act": "relu"/"size": 16, "act": "tanh"/' "$tmp/small.json" >"$tmp/tanh.json"
short() {
    name=$1 m=$2 want=$3; shift 3
    "$PIPENET" train "$m" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" --steps 9 \
        --threads 1 --log-every 1000 "$@" >"$tmp/$name.out" 2>&1
    rc=$?
    [ "$rc" -eq "$want" ] || { cat "$tmp/$name.out"; fail "$name: exit $rc, expected $want"; }
}
has() { grep -qF -- "$2" "$tmp/$1.out" || { cat "$tmp/$1.out"; fail "$1: no '$2'"; }; }
hash9() { grep -o 'parameter hash after 9 steps: [0-9a-f]*' "$tmp/$1.out" | cut -d' ' -f6; }
after4() { grep -o '"step": [0-9]*, "epoch": [0-9]*, "[a-z_]*' "$tmp/$1.jsonl" | awk '$2 + 0 > 4'; }
short s7 "$tmp/small.json" 0 --seed 7 --batch 10000 --snapshot-dir "$tmp/s7" --snapshot-every 4 \
    --metrics "$tmp/s7.jsonl"
snap4=$tmp/s7/snapshot-0000000004.h5
short kept "$tmp/small.json" 0 --resume "$snap4" --metrics "$tmp/kept.jsonl"
[ -n "$(hash9 s7)" ] && [ "$(hash9 s7)" = "$(hash9 kept)" ] ||
    fail "resumed without --seed: hash $(hash9 kept), the --seed 7 run's $(hash9 s7)"
has kept "resuming from $snap4: step 4, epoch 1, next batch 5 of 6, seed 7"
[ "$(grep '^epoch [0-9]*:' "$tmp/kept.out" | cut -d: -f1 | tr '\n' ' ')" = "epoch 1 epoch 2 " ] ||
    fail "kept: the epoch lines are not epoch 1 and 2: $(grep '^epoch' "$tmp/kept.out")"
[ "$(after4 s7 | grep -c '"epoch": 2')" -eq 4 ] && [ "$(after4 s7)" = "$(after4 kept)" ] ||
    fail "the metrics after step 4 differ from the straight run's: $(after4 kept)"
echo "ok: resumed without --seed and --batch: seed 7, batch 10000, epoch numbers kept;" \
     "hash $(hash9 kept)"

short seed8 "$tmp/small.json" 1 --resume "$snap4" --seed 8
has seed8 "$snap4: the snapshot's run has seed 7, --seed gives 8"
has seed8 "--resume-override"
short batch5k "$tmp/small.json" 1 --resume "$snap4" --batch 5000
has batch5k "$snap4: the snapshot's run has global batch 10000, --batch gives 5000"
has batch5k "--resume-override"
short tanh "$tmp/tanh.json" 1 --resume "$snap4"
where="at layers[0].act (layer 'h'): \"relu\" in the snapshot, \"tanh\" in $tmp/tanh.json"
has tanh "$snap4: was written by another model than $tmp/tanh.json: $where"
has tanh "--resume-override"
echo "ok: another --seed, --batch or activation is refused, naming the snapshot and both values"

short forced "$tmp/tanh.json" 0 --resume "$snap4" --seed 8 --batch 5000 --resume-override
for w in "with seed 8, its run had 7" "with global batch 5000, its run had 10000" \
         "with another model than its own (--resume-override): at layers[0].act"; do
    [ "$(grep -cF "warning: resuming $snap4 $w" "$tmp/forced.out")" -eq 1 ] ||
        { cat "$tmp/forced.out"; fail "forced: not one warning '$w'"; }
done
has forced "batch 5000, 12 steps/epoch"
# the snapshot's position counts its own batches: 4 of 10000 are 40000 samples,
# where batches of 5000 go on at the 9th; batches of 35000 have none left
has forced "resuming from $snap4: step 4, epoch 1, next batch 9 of 12, seed 8; its run had batches of 10000 and had trained 40000 samples of epoch 1, 0 of them trained again"
short wide "$tmp/small.json" 0 --resume "$snap4" --batch 35000 --resume-override
has wide "resuming from $snap4: step 4, epoch 2, next batch 1 of 1, seed 7; its run had batches of 10000 and had trained 40000 samples of epoch 1: no batch of 35000 left in the epoch"
short lone "$tmp/small.json" 2 --resume-override
has lone "--resume-override: only with --resume"
echo "ok: --resume-override resumes with the new seed, batch and model, one warning each"

short fresh "$tmp/small.json" 0 --seed 7 --batch 10000 --snapshot-dir "$tmp/fresh" --resume auto
has fresh "no snapshot in $tmp/fresh yet: starting at step 0"
[ "$(hash9 fresh)" = "$(hash9 s7)" ] ||
    fail "resume auto from nothing: hash $(hash9 fresh) != $(hash9 s7)"
echo "ok: --resume auto before the first snapshot starts at step 0 with the settings given"
echo "PASS: resume"

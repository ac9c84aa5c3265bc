#!/bin/sh
# Snapshots and resume end to end on Fashion-MNIST (skips, 77, without the Debian
# package): N steps straight vs N/2, snapshot, resume, N/2 give identical losses and
# parameter hash; a snapshot written by a 2-stage pipeline resumes on one process
# and on 2 replicas x 2 stages along the same trajectory (bit-exact with
# --deterministic); --resume auto skips a corrupted newest snapshot. (Stop signals:
# test_signals.sh.)
set -u
PIPENET=${PIPENET:-./pipenet}
SRC=/usr/share/datasets/fashion-mnist
[ -d "$SRC" ] || { echo "SKIP: $SRC not installed (dataset-fashion-mnist)"; exit 77; }
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$PIPENET" import fashion-mnist --src "$SRC" --out "$tmp/fm" >/dev/null || fail "import"

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

# 4. a corrupted newest snapshot: resume auto takes the one before, naming it
mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" --stages 2 \
    --steps 30 --batch 64 --threads 1 --log-every 1000 --snapshot-dir "$tmp/corrupt" \
    --snapshot-every 10 >/dev/null 2>&1 || fail "corrupt: first run"
newest=$tmp/corrupt/snapshot-0000000030.h5
size=$(wc -c <"$newest")
printf 'garbage!garbage!' | dd of="$newest" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
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
echo "PASS: resume"

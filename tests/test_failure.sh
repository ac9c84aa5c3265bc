#!/bin/sh
# A failing rank ends the whole job: an error injected on the first stage, on the
# last stage, and a rank killed with SIGKILL must each make mpirun exit non-zero
# within 10 seconds of the fault (the time the fault prints, so a slow start-up on a
# loaded machine does not count), with an injected error printed once, naming rank
# and stage.
# Skips (77) without the Debian Fashion-MNIST package.
set -u
. "$(dirname "$0")/script_fixture.sh"
import_fashion_mnist
here=$(cd "$(dirname "$0")/.." && pwd)

# run FAULT: a 4-stage job of 30 steps with PIPENET_FAULT=FAULT; sets rc, and secs:
# whole seconds from the fault to the job's end
run() {
    PIPENET_FAULT=$1 timeout 60 mpirun --oversubscribe -np 4 "$PIPENET" train \
        "$here/models/fashion_mlp.json" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" \
        --stages 4 --steps 30 \
        --batch 64 --threads 1 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    end=$(date +%s.%N)
    at=$(sed -n 's/^PIPENET_FAULT at [^:]*: //p' "$tmp/err" | head -n 1)
    [ -n "$at" ] || { cat "$tmp/err"; fail "fault $1 did not happen"; }
    secs=$(echo "$end $at" | awk '{ printf "%d", $1 - $2 }')
}

for case in "0:5 0 0" "3:5 3 3"; do
    set -- $case
    run "$1"
    [ $rc -ne 0 ] || fail "fault on rank $2: exit status 0"
    [ $rc -ne 124 ] || fail "fault on rank $2: the job hung"
    [ $secs -le 10 ] || fail "fault on rank $2: the job took $secs s to end"
    n=$(grep -c "pipenet: error: rank $2 (stage $3, replica 0): step 5: fault injected" "$tmp/err")
    [ "$n" -eq 1 ] || { cat "$tmp/err"; fail "fault on rank $2: error printed $n times"; }
    [ "$(grep -c 'pipenet: error' "$tmp/err")" -eq 1 ] || fail "fault on rank $2: other ranks printed errors too"
    echo "ok: error on stage $3 ended the job in $secs s (exit $rc)"
done

run "2:5:kill"
[ $rc -ne 0 ] || fail "killed rank: exit status 0"
[ $rc -ne 124 ] || fail "killed rank: the job hung"
[ $secs -le 10 ] || fail "killed rank: the job took $secs s to end"
echo "ok: SIGKILL of rank 2 ended the job in $secs s (exit $rc)"
# errors every rank sees before any work: reported once, clean exit, no abort
mpirun --oversubscribe -np 3 "$PIPENET" train "$here/models/fashion_mlp.json" --stages 2 \
    --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" >"$tmp/out" 2>"$tmp/err"
[ $? -ne 0 ] || fail "3 ranks for 2 stages: exit status 0"
[ "$(grep -c 'pipenet: error: 3 ranks cannot hold replicas of a 2-stage pipeline' "$tmp/err")" -eq 1 ] ||
    { cat "$tmp/err"; fail "3 ranks for 2 stages: not reported exactly once"; }
mpirun --oversubscribe -np 2 "$PIPENET" train "$here/models/fashion_mlp.json" --stages 2 \
    --data "$tmp/none.h5" >"$tmp/out" 2>"$tmp/err"
[ $? -ne 0 ] || fail "missing data: exit status 0"
[ "$(grep -c "pipenet: error: rank 0 (stage 0, replica 0): cannot open '$tmp/none.h5'" "$tmp/err")" -eq 1 ] ||
    { cat "$tmp/err"; fail "missing data: not reported exactly once with rank and stage"; }
# a snapshot directory that a writer of parts does not see (each rank its own working
# directory, a relative --snapshot-dir: as a node-local path on each node would be)
mkdir -p "$tmp/wa" "$tmp/wb"
pn=$(cd "$(dirname "$PIPENET")" && pwd)/$(basename "$PIPENET")
wd() { echo "-np 1 -wdir $tmp/$1 $pn train $here/models/fashion_mlp.json --stages 2 \
    --data $tmp/fm/train.h5 --eval= --steps 4 --batch 64 --threads 1 --snapshot-dir snaps"; }
timeout 60 mpirun --oversubscribe $(wd wa) : $(wd wb) >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] || { cat "$tmp/err"; fail "unseen snapshot directory: exit status not 1"; }
[ "$(grep -c "pipenet: error: rank 0 (stage 0, replica 0): snapshot directory 'snaps': rank 1 failed to see it" "$tmp/err")" -eq 1 ] ||
    { cat "$tmp/err"; fail "unseen snapshot directory: not reported exactly once"; }
[ -z "$(ls "$tmp/wa/snaps")" ] || fail "unseen snapshot directory: trained into it: $(ls "$tmp/wa/snaps")"
echo "ok: a bad layout, a missing file and a snapshot directory a writer does not see are reported once before any work"

# divergence (sgd at lr 1e6): every rank stops at the first non-finite gradient,
# before the update, one message naming the parameter, no abort; the snapshot of
# the step before is kept and verifies
sed 's/"optimizer": {[^}]*}[^}]*}/"optimizer": {"type": "sgd", "lr": 1e6}/' \
    "$here/models/fashion_mlp.json" >"$tmp/diverge.json"
grep -q '"sgd", "lr": 1e6' "$tmp/diverge.json" || fail "could not make the diverging model"
mpirun --oversubscribe -np 2 "$PIPENET" train "$tmp/diverge.json" --stages 2 --steps 30 \
    --batch 64 --threads 1 --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" --snapshot-dir "$tmp/div" \
    --snapshot-every 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/err"; fail "divergence: exit $rc, expected 1"; }
[ "$(grep -c "the gradient of 'fc1/w' (stage 0) is NaN or infinite: training diverged" "$tmp/err")" -eq 1 ] ||
    { cat "$tmp/err"; fail "divergence: not reported exactly once"; }
grep -q "MPI_ABORT" "$tmp/err" && fail "divergence: the job was aborted instead of stopping together"
step=$(sed -n 's/.*step \([0-9]*\): the gradient.*/\1/p' "$tmp/err")
last=$(ls "$tmp/div" | grep -v '\.part-' | tail -n 1)
[ "$last" = "$(printf 'snapshot-%010d.h5' "$step")" ] || fail "divergence at step $step, newest snapshot $last"
"$PIPENET" inspect "$tmp/div/$last" | grep -q "every checksum verified" || fail "divergence: $last does not verify"
"$PIPENET" inspect "$tmp/div/$last" | grep -qi "nan" && fail "divergence: $last holds NaN"
echo "ok: divergence at step $step stopped every rank before the update; $last kept"

# faults while a snapshot of parts is written (docs/snapshots.md, "Saving"): in a
# part's write (rank 1, after its first dataset), between the parts and the index
# (rank 0), in the index (rank 0, its temporary written and checked, not renamed),
# each as an error and as SIGKILL. The job ends; the snapshot of step 10 already
# there is kept and verifies, nothing of step 20 is committed, an error leaves no
# file of step 20 behind (a kill leaves parts or temporaries); the next run resumes
# step 10 and, once it has saved (steps 15 and 30), no part without its index and no
# temporary is left.
snaprun() { # DIR STEPS EVERY [FAULT]: 2 stages, a snapshot every EVERY steps into DIR
    PIPENET_FAULT=${4:-} timeout 120 mpirun --oversubscribe -np 2 "$PIPENET" train \
        "$here/models/fashion_mlp.json" --data "$tmp/fm/train.h5" --eval= --stages 2 \
        --steps "$2" --batch 64 --threads 1 --log-every 1000 --snapshot-dir "$1" \
        --snapshot-every "$3" --resume auto >"$tmp/out" 2>"$tmp/err"
}
# only_committed DIR: every part has its index, and no temporary is there
only_committed() {
    for f in "$1"/snapshot-*; do
        case $f in
        *.tmp-*) fail "$f: a temporary left in $1: $(ls "$1")" ;;
        *.part-*) [ -f "${f%%.part-*}.h5" ] || fail "$f: a part without its index: $(ls "$1")" ;;
        esac
    done
}
snaprun "$tmp/sbase" 10 10 || { cat "$tmp/err"; fail "snapshot faults: the first run"; }
for fault in 1:part 1:part:kill 0:parts 0:parts:kill 0:index 0:index:kill; do
    d=$tmp/sf-$(echo "$fault" | tr : -)
    cp -r "$tmp/sbase" "$d"
    snaprun "$d" 20 10 "$fault"
    rc=$?
    grep -q "PIPENET_FAULT at" "$tmp/err" || { cat "$tmp/err"; fail "$fault: no fault"; }
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$tmp/err"; fail "$fault: exit $rc"; }
    [ -f "$d/snapshot-0000000020.h5" ] && fail "$fault: the snapshot of step 20 was committed"
    "$PIPENET" inspect "$d/snapshot-0000000010.h5" | grep -q "every checksum verified" ||
        fail "$fault: the snapshot of step 10 does not verify"
    case $fault in
    *kill) ls "$d" | grep -q 0000000020 || fail "$fault: the kill left nothing of step 20 to clean" ;;
    *) ls "$d" | grep -q 0000000020 && fail "$fault: left $(ls "$d" | grep 0000000020)"
       grep -q "snapshot at step 20 (the snapshots already in $d are kept)" "$tmp/err" ||
           { cat "$tmp/err"; fail "$fault: no word of the failed snapshot"; } ;;
    esac
    # a kill's temporaries carry the pid of that job's rank 0, which mpirun may still
    # be ending (it catches SIGTERM): only a dead writer's temporaries are deleted
    for f in "$d"/*.tmp-*; do
        [ -e "$f" ] || continue
        n=0
        while kill -0 "${f##*.tmp-}" 2>/dev/null && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
    done
    # snapshots at 15 and 30: what a kill left of step 20 is not written over
    snaprun "$d" 30 15 || { cat "$tmp/err"; fail "$fault: the run after it"; }
    grep -q "resuming from $d/snapshot-0000000010.h5: step 10" "$tmp/err" "$tmp/out" ||
        { cat "$tmp/out"; fail "$fault: the next run did not resume step 10"; }
    only_committed "$d"
    [ -f "$d/snapshot-0000000030.h5" ] || fail "$fault: no snapshot of step 30 after it"
    echo "ok: snapshot fault $fault (exit $rc): step 10 kept, nothing left after the next save"
done
# a step saved again (a run gone back to step 10 trains past 20 once more) whose save
# fails: the old index of step 20 went before the new parts were written, so no index
# shows a mix of two saves' parts; nothing of step 20 is left, step 10 is kept
d=$tmp/sf-again
cp -r "$tmp/sbase" "$d"
snaprun "$d" 20 10 && [ -f "$d/snapshot-0000000020.h5" ] || { cat "$tmp/err"; fail "again: no snapshot of step 20"; }
PIPENET_FAULT=1:part timeout 120 mpirun --oversubscribe -np 2 "$PIPENET" train \
    "$here/models/fashion_mlp.json" --data "$tmp/fm/train.h5" --eval= --stages 2 --steps 20 \
    --batch 64 --threads 1 --log-every 1000 --snapshot-dir "$d" --snapshot-every 10 \
    --resume "$d/snapshot-0000000010.h5" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] || { cat "$tmp/err"; fail "again: exit status not 1"; }
ls "$d" | grep -q 0000000020 && fail "again: left $(ls "$d" | grep 0000000020)"
"$PIPENET" inspect "$d/snapshot-0000000010.h5" | grep -q "every checksum verified" ||
    fail "again: the snapshot of step 10 does not verify"
echo "ok: a failed save of a step saved before leaves no index over a mix of parts"
echo "PASS: failure"

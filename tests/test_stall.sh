#!/bin/sh
# A stalled rank ends the job: in 2 replicas x 2 stages, rank 3 stops itself (SIGSTOP,
# PIPENET_FAULT=3:5:stop) at step 5; with --stall-timeout 5 the job must exit non-zero
# (not hang) within 40 s of the stall, with one error line that names the stalled rank,
# and leave no process behind. The same for a rank stopped while a snapshot is written
# (below); with --stall-timeout 0 nothing is watched. A bad --stall-timeout is a usage
# error.
# Skips (77) without the Debian Fashion-MNIST package.
set -u
. "$(dirname "$0")/script_fixture.sh"
need_fashion_mnist
here=$(cd "$(dirname "$0")/.." && pwd)
# this test's ranks are the processes that read $tmp/fm: wake and end any left over
leftovers() { pgrep -f "train.*$tmp/fm/train.h5"; }
cleanup() {
    for p in $(leftovers); do kill -CONT "$p"; kill -KILL "$p"; done 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
# ended_once WHAT RC LINE: the job of exit status RC whose stderr is $tmp/err ended
# (not hung, not 0) within 40 s of its fault, with one error line, matching LINE (a
# grep pattern), and no process left behind; sets $secs
ended_once() {
    end=$(date +%s.%N)
    at=$(sed -n 's/^PIPENET_FAULT at [^:]*: //p' "$tmp/err" | head -n 1)
    [ -n "$at" ] || { cat "$tmp/err"; fail "$1: the stall did not happen"; }
    secs=$(echo "$end $at" | awk '{ printf "%d", $1 - $2 }')
    [ "$2" -ne 124 ] || fail "$1: the job hung"
    [ "$2" -ne 0 ] || fail "$1: exit status 0"
    [ "$secs" -le 40 ] || fail "$1: the job took $secs s to end after the stall"
    n=$(grep -c "$3" "$tmp/err")
    [ "$n" -eq 1 ] || { cat "$tmp/err"; fail "$1: the stalled rank is named $n times"; }
    [ "$(grep -c 'pipenet: error' "$tmp/err")" -eq 1 ] ||
        { cat "$tmp/err"; fail "$1: more than one error line"; }
    sleep 1
    [ -z "$(leftovers)" ] || fail "$1: processes left behind: $(leftovers)"
}

"$PIPENET" train "$here/models/fashion_mlp.json" --stall-timeout -1 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--stall-timeout -1: not a usage error"
grep -q -- "--stall-timeout: expected a number in \[0" "$tmp/err" ||
    { cat "$tmp/err"; fail "--stall-timeout -1: no message"; }

import_fashion_mnist
PIPENET_FAULT=3:5:stop timeout 120 mpirun --oversubscribe -np 4 "$PIPENET" train \
    "$here/models/fashion_mlp.json" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" \
    --stages 2 --steps 30 --batch 64 --threads 1 --stall-timeout 5 >"$tmp/out" 2>"$tmp/err"
ended_once "step 5" $? 'pipenet: error: rank [0-2] (stage [01], replica [01]): step 5: no progress for 5 s (--stall-timeout) waiting for .*; no answer within 2 s (stopped, or busy outside MPI) from rank 3 (stage 1, replica 1) on host [^ ]*$'
echo "ok: rank 3 stopped at step 5, the job ended in $secs s: $(grep 'pipenet: error' "$tmp/err")"

# a rank stopped while a snapshot is written ends the job too, under the snapshot's own
# bound (docs/running.md: with --stall-timeout 5, 5 s plus the snapshot's bytes at
# 20 MB/s): rank 1 in its part's write (the others wait for every part), rank 0 between
# the parts and the index (the others wait for the index). Within 40 s, one error line
# naming the stopped rank and the snapshot, nothing left behind, and the snapshot of
# step 10 already in the directory verifies.
snaprun() { # DIR STEPS FAULT STALL: 2 stages x 2 replicas, a snapshot every 10 steps
    PIPENET_FAULT=$3 timeout 120 mpirun --oversubscribe -np 4 "$PIPENET" train \
        "$here/models/fashion_mlp.json" --data "$tmp/fm/train.h5" --eval= --stages 2 \
        --steps "$2" --batch 64 --threads 1 --log-every 1000 --snapshot-dir "$1" \
        --snapshot-every 10 --resume auto --stall-timeout "$4" >"$tmp/out" 2>"$tmp/err"
}
snaprun "$tmp/snap" 10 "" 5 || { cat "$tmp/err"; fail "the run that saves step 10"; }
for fault in 1:part:stop 0:parts:stop; do
    r=${fault%%:*}
    d=$tmp/snap-$r
    cp -r "$tmp/snap" "$d"
    snaprun "$d" 20 "$fault" 5
    ended_once "$fault" $? "pipenet: error: rank [0-3] (stage [01], replica [01]): writing the snapshot of step 20: no progress for [0-9]* s (the bound of a snapshot, docs/running.md) waiting for .*; no answer within 2 s (stopped, or busy outside MPI) from rank $r (stage $r, replica 0) on host [^ ]*$"
    "$PIPENET" inspect "$d/snapshot-0000000010.h5" | grep -q "every checksum verified" ||
        fail "$fault: the snapshot of step 10 does not verify"
    # the job's end wakes the stopped rank (SIGCONT, SIGTERM, then SIGKILL): rank 0 may
    # commit step 20 from the parts in that moment, which must then verify as well
    [ ! -f "$d/snapshot-0000000020.h5" ] ||
        "$PIPENET" inspect "$d/snapshot-0000000020.h5" | grep -q "every checksum verified" ||
        fail "$fault: a snapshot of step 20 that does not verify"
    echo "ok: $fault: the job ended in $secs s: $(grep 'pipenet: error' "$tmp/err")"
done

# --stall-timeout 0 watches nothing, snapshots included: the job still waits on the
# stopped rank 12 s after the stop (the bound above would have ended it)
cp -r "$tmp/snap" "$tmp/snap-off"
rm -f "$tmp/err" # the last case's fault line is not this one's
snaprun "$tmp/snap-off" 20 1:part:stop 0 &
job=$!
n=0
until grep -q "PIPENET_FAULT at" "$tmp/err" 2>/dev/null || [ $n -ge 900 ]; do sleep 0.1; n=$((n + 1)); done
grep -q "PIPENET_FAULT at" "$tmp/err" || { cat "$tmp/err"; fail "--stall-timeout 0: the stop did not happen"; }
sleep 12
kill -0 $job 2>/dev/null || { cat "$tmp/err"; fail "--stall-timeout 0: the job ended on its own"; }
grep -q 'pipenet: error' "$tmp/err" && { cat "$tmp/err"; fail "--stall-timeout 0: an error"; }
for p in $(leftovers); do kill -CONT "$p"; kill -KILL "$p"; done 2>/dev/null
wait $job
echo "ok: --stall-timeout 0: still waiting 12 s after rank 1 stopped in a snapshot"
echo "PASS: stall"

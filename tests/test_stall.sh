#!/bin/sh
# A stalled rank ends the job: in 2 replicas x 2 stages, rank 3 stops itself (SIGSTOP,
# PIPENET_FAULT=3:5:stop) at step 5; with --stall-timeout 5 the job must exit non-zero
# (not hang) within 40 s of the stall, with one error line that names the stalled rank,
# and leave no process behind. A bad --stall-timeout is a usage error.
# Skips (77) without the Debian Fashion-MNIST package.
set -u
PIPENET=${PIPENET:-./pipenet}
SRC=/usr/share/datasets/fashion-mnist
[ -d "$SRC" ] || { echo "SKIP: $SRC not installed (dataset-fashion-mnist)"; exit 77; }
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
# this test's ranks are the processes that read $tmp/fm: wake and end any left over
leftovers() { pgrep -f "train.*$tmp/fm/train.h5"; }
cleanup() {
    for p in $(leftovers); do kill -CONT "$p"; kill -KILL "$p"; done 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

"$PIPENET" train "$here/models/fashion_mlp.json" --stall-timeout -1 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--stall-timeout -1: not a usage error"
grep -q -- "--stall-timeout: expected a number in \[0" "$tmp/err" ||
    { cat "$tmp/err"; fail "--stall-timeout -1: no message"; }

"$PIPENET" import fashion-mnist --src "$SRC" --out "$tmp/fm" >/dev/null || fail "import"
PIPENET_FAULT=3:5:stop timeout 120 mpirun --oversubscribe -np 4 "$PIPENET" train \
    "$here/models/fashion_mlp.json" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" \
    --stages 2 --steps 30 --batch 64 --threads 1 --stall-timeout 5 >"$tmp/out" 2>"$tmp/err"
rc=$?
end=$(date +%s.%N)
at=$(sed -n 's/^PIPENET_FAULT at [^:]*: //p' "$tmp/err" | head -n 1)
[ -n "$at" ] || { cat "$tmp/err"; fail "the stall did not happen"; }
secs=$(echo "$end $at" | awk '{ printf "%d", $1 - $2 }')
[ $rc -ne 124 ] || fail "the job hung"
[ $rc -ne 0 ] || fail "exit status 0"
[ $secs -le 40 ] || fail "the job took $secs s to end after the stall"
reporter='pipenet: error: rank [0-2] (stage [01], replica [01]): step 5'
n=$(grep -c "$reporter: no progress for 5 s (--stall-timeout) waiting for .*; no answer within 2 s (stopped, or busy outside MPI) from rank 3 (stage 1, replica 1) on host [^ ]*$" "$tmp/err")
[ "$n" -eq 1 ] || { cat "$tmp/err"; fail "the stalled rank is named $n times"; }
[ "$(grep -c 'pipenet: error' "$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "more than one error line"; }
sleep 1
[ -z "$(leftovers)" ] || fail "processes left behind: $(leftovers)"
echo "ok: rank 3 stopped at step 5, the job ended in $secs s (exit $rc): $(grep 'pipenet: error' "$tmp/err")"
echo "PASS: stall"

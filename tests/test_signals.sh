#!/bin/sh
# Stopping cleanly whenever a stop signal comes, and never losing work to the snapshot
# directory (skips, 77, without the Debian Fashion-MNIST package):
#  1. SIGUSR1 through mpirun as soon as both ranks are in pipenet's main (during MPI
#     start-up or set-up), without --snapshot-dir: exit 4 (stopped, nothing saved),
#     no death by signal;
#  2. a signal at each set-up point (PIPENET_FAULT: setup, data, resume) and during a
#     step: exit 3, a snapshot exactly when steps were trained since the last one;
#     during a step without --snapshot-dir: exit 4, saying nothing was saved;
#  3. SIGUSR1 mid-run through mpirun: snapshot, exit 3; --resume auto finishes, exit 0;
#  4. a nested snapshot directory is created before training; one that cannot be
#     created fails before training, naming the path;
#  5. a snapshot that cannot be written (file-size limit: a full disk) stops the run
#     with exit 1 and a message, keeps the snapshots already written, leaves no
#     temporary file, and the run resumes from the last good one.
set -u
. "$(dirname "$0")/script_fixture.sh"
import_fashion_mnist
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/fashion_mlp.json

# train NAME STEPS [options]: 2 stages on 2 ranks, output in $tmp/NAME.out, status in rc
train() {
    name=$1 steps=$2; shift 2
    timeout 300 mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" \
        --stages 2 --steps "$steps" --batch 64 --threads 1 --log-every 1000 "$@" \
        >"$tmp/$name.out" 2>&1
    rc=$?
}
expect() { # expect NAME STATUS PATTERN
    [ "$rc" -eq "$2" ] || { cat "$tmp/$1.out"; fail "$1: exit $rc, expected $2"; }
    grep -q "$3" "$tmp/$1.out" || { cat "$tmp/$1.out"; fail "$1: no line matching '$3'"; }
}

# 1. right after launch: wait until both ranks have their handler (SigCgt bit of
# SIGUSR1 = 10), then signal mpirun, which forwards to the ranks
timeout 300 mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" \
    --stages 2 --steps 100000 --batch 64 --threads 1 --log-every 1000 >"$tmp/early.out" 2>&1 &
pid=$!
ready=0 launcher=
for _ in $(seq 1 600); do
    [ -n "$launcher" ] || launcher=$(pgrep -P "$pid" | head -n 1) # mpirun, under timeout
    n=0
    for p in $(pgrep -P "${launcher:-0}" -x pipenet 2>/dev/null); do
        mask=$(sed -n 's/^SigCgt:\t*//p' "/proc/$p/status" 2>/dev/null)
        [ -n "$mask" ] && [ $((0x$mask & 0x200)) -ne 0 ] && n=$((n + 1))
    done
    [ $n -eq 2 ] && { ready=1; break; }
    sleep 0.05
done
[ $ready -eq 1 ] || { kill $pid; fail "early: the ranks never installed their handlers"; }
kill -USR1 "$launcher"
wait $pid
rc=$?
expect early 4 "stopping .*on SIGUSR1.* with nothing saved (no --snapshot-dir)"
echo "ok: SIGUSR1 right after start-up without --snapshot-dir: clean stop, exit 4"

# 2. a signal at each set-up point, and during step 5 with a snapshot at step 4
for point in setup:usr1 data:term; do
    PIPENET_FAULT=1:$point train "at-${point%%:*}" 30 --snapshot-dir "$tmp/points"
    expect "at-${point%%:*}" 3 "stopping on SIG[A-Z0-9]* before the first step: nothing new to save"
done
PIPENET_FAULT=0:5:usr1 train at-step 30 --snapshot-dir "$tmp/points" --snapshot-every 4
expect at-step 3 "stopping at step 6 on SIGUSR1 after writing a snapshot"
[ -f "$tmp/points/snapshot-0000000006.h5" ] || fail "at-step: no snapshot of step 6"
expect at-step 3 "^newest snapshot: $tmp/points/snapshot-0000000006.h5; export it with: pipenet export "
PIPENET_FAULT=1:resume:term train at-resume 30 --snapshot-dir "$tmp/points" --resume auto
expect at-resume 3 "stopping on SIGTERM before the first step: nothing new to save"
grep -q "resuming from .*snapshot-0000000006.h5" "$tmp/at-resume.out" || fail "at-resume: no resume"
expect at-resume 3 "^newest snapshot: $tmp/points/snapshot-0000000006.h5; export it with"
PIPENET_FAULT=0:5:usr1 train unsaved 30
expect unsaved 4 "stopping at step 6 on SIGUSR1 with nothing saved (no --snapshot-dir): the 6 steps trained here are lost"
echo "ok: signals during set-up, data loading, resume and a step: exit 3, snapshot when due;" \
     "exit 4 when nothing could be saved"

# 3. SIGUSR1 mid-run: snapshot, exit 3; then --resume auto finishes with exit 0
timeout 300 mpirun --oversubscribe -np 2 "$PIPENET" train "$model" --data "$tmp/fm/train.h5" --eval "$tmp/fm/test.h5" \
    --stages 2 --steps 100000 --batch 64 --threads 1 --log-every 1000 \
    --snapshot-dir "$tmp/mid" >"$tmp/mid.out" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
    grep -q "^layout:" "$tmp/mid.out" 2>/dev/null && break
    sleep 0.05
done
sleep 1
kill -USR1 "$(pgrep -P "$pid" | head -n 1)" # mpirun, under timeout
wait $pid
rc=$?
expect mid 3 "stopping at step [0-9]* on SIGUSR1 after writing a snapshot"
stopped=$(grep -o 'stopping at step [0-9]*' "$tmp/mid.out" | cut -d' ' -f4)
[ -f "$(printf '%s/snapshot-%010d.h5' "$tmp/mid" "$stopped")" ] || fail "mid: no snapshot of step $stopped"
train mid-resume $((stopped + 3)) --snapshot-dir "$tmp/mid" --resume auto
expect mid-resume 0 "parameter hash after $((stopped + 3)) steps"
echo "ok: SIGUSR1 mid-run at step $stopped: snapshot, exit 3; resumed to the end, exit 0"

# 4. the snapshot directory: created at any depth before training; refused early
train nested 2 --snapshot-dir "$tmp/deep/er/dir"
expect nested 0 "snapshot at step 2"
[ -f "$tmp/deep/er/dir/snapshot-0000000002.h5" ] || fail "nested: no snapshot"
: >"$tmp/plainfile"
train blocked 100000 --snapshot-dir "$tmp/plainfile/snaps"
expect blocked 1 "cannot create snapshot directory '$tmp/plainfile/snaps'"
grep -q "^training\|^step " "$tmp/blocked.out" && fail "blocked: training started before the check"
echo "ok: nested snapshot directory created; an impossible one refused before training"

# 5. a full disk (a file-size limit below one snapshot, ~22 MB) at snapshot time
train full-first 4 --snapshot-dir "$tmp/full"
expect full-first 0 "snapshot at step 4"
(ulimit -f 8192; train full 8 --snapshot-dir "$tmp/full" --resume auto
 echo $rc >"$tmp/full.rc")
rc=$(cat "$tmp/full.rc")
expect full 1 "snapshot at step 8 (the snapshots already in $tmp/full are kept): .*File too large"
# the snapshot of step 4 (its index and parts) alone: nothing of step 8 is left
[ "$(ls "$tmp/full" | grep -v '^snapshot-0000000004\.\(h5\|part-[0-9-]*\.h5\)$')" = "" ] &&
    [ -f "$tmp/full/snapshot-0000000004.h5" ] || fail "full: directory holds $(ls "$tmp/full")"
train full-resume 6 --snapshot-dir "$tmp/full" --resume auto
expect full-resume 0 "resuming from $tmp/full/snapshot-0000000004.h5: step 4"
echo "ok: a snapshot that does not fit stops the run (exit 1), the previous one is intact"
echo "PASS: signals"

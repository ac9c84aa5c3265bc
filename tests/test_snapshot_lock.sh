#!/bin/sh
# One run per snapshot directory (src/io/snapshot_lock.h), with a tiny GPT:
#  1. while a run trains, a second one given its --snapshot-dir is refused before it
#     trains, naming the holder (host, pid, start), on one process and on 2 ranks
#     (every rank stops, one message); the first run's snapshots are untouched;
#  2. the lock goes with the run: after a stop signal (exit 3), an error (exit 1)
#     and a finished run (exit 0) the directory is free;
#  3. a crashed run's lock (SIGKILL) does not block its resume, which takes it over
#     naming the dead holder; so is a lock whose pid is now another process's, and
#     one whose holder has exited but is not yet reaped (a zombie: mpirun may
#     return while an aborted rank is one, and a container's init reaps slowly);
#  4. a lock from another host is refused (nothing can tell that its holder is
#     gone) unless it is an earlier start of this batch job: a requeued Slurm job
#     (SLURM_RESTART_COUNT higher), a rerun PBS job; a lock that names no holder is
#     refused.
set -u
. "$(dirname "$0")/script_fixture.sh"
. "$(dirname "$0")/lm_fixture.sh"
import_times_table 600
tiny_gpt 256 '{"batch": 16, "seed": 3, "optimizer": {"type": "adam", "lr": 0.01}}' >"$tmp/gpt.json"
snaps=$tmp/snaps
lock=$snaps/pipenet.lock
host=$(hostname)

# train [options]: the tiny GPT on one process, output in $tmp/out
train() {
    timeout 120 "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --threads 1 \
        --log-every 1000 "$@"
}

# start_long NAME: a run that trains until it is stopped, in the background (pid
# $long, killed at exit), once it has started training (output in $tmp/NAME.out)
long=
trap '[ -z "$long" ] || kill -KILL $long 2>/dev/null; rm -rf "$tmp"' EXIT
start_long() {
    "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --threads 1 --log-every 1000 \
        --steps 10000000 --snapshot-dir "$snaps" --snapshot-every 50 >"$tmp/$1.out" 2>&1 &
    long=$!
    for _ in $(seq 1 600); do
        grep -q '^training' "$tmp/$1.out" 2>/dev/null && return
        kill -0 $long 2>/dev/null || { cat "$tmp/$1.out"; fail "$1 ended before it trained"; }
        sleep 0.05
    done
    kill $long
    fail "$1 did not start training"
}

# 1. a second run on the directory of a running one
start_long first
expect 1 "snapshot directory '$snaps' is in use by another run: pipenet pid $long on host $host, started 20[0-9-]* [0-9:]*" \
    train --steps 5 --snapshot-dir "$snaps"
grep -q "holds $lock" "$tmp/out" || fail "the lock file is not named: $(cat "$tmp/out")"
grep -q '^training\|^step\|snapshot at' "$tmp/out" && fail "the second run trained: $(cat "$tmp/out")"
expect 1 "snapshot directory '$snaps' is in use by another run: pipenet pid $long on host $host" \
    timeout 120 mpirun --oversubscribe -np 2 "$PIPENET" train "$tmp/gpt.json" --stages 2 \
    --data "$tmp/lm/train.h5" --threads 1 --steps 5 --snapshot-dir "$snaps" --resume auto
[ "$(grep -c 'error' "$tmp/out")" -eq 1 ] || fail "2 ranks: not one error message: $(cat "$tmp/out")"
grep -q 'resuming\|^training' "$tmp/out" && fail "2 ranks: the second run went on: $(cat "$tmp/out")"
echo "ok: a second run on a directory in use is refused, naming pid $long on $host (1 and 2 ranks)"

# 2. the lock goes with the run: a stop signal...
kill -USR1 $long
wait $long
rc=$?
[ $rc -eq 3 ] || { cat "$tmp/first.out"; fail "the first run exited $rc after SIGUSR1, not 3"; }
grep -q "^snapshot at step [0-9]*: $snaps/snapshot-" "$tmp/first.out" ||
    fail "the first run wrote no snapshot: $(cat "$tmp/first.out")"
[ ! -e "$lock" ] || fail "the lock outlived a run stopped by SIGUSR1: $(cat "$lock")"
# ... an error after the lock was taken (a data file that does not exist)...
expect 1 "missing.h5" train --steps 5 --snapshot-dir "$snaps" --data "$tmp/missing.h5"
[ ! -e "$lock" ] || fail "the lock outlived a run that failed: $(cat "$lock")"
# ... and the end of a run, which resumes the stopped one
expect 0 "resuming from $snaps/snapshot-" train --steps 5 --snapshot-dir "$snaps" --resume auto
[ ! -e "$lock" ] || fail "the lock outlived a finished run: $(cat "$lock")"
echo "ok: the directory is free after a stop signal (exit 3), an error and a finished run"

# 3. a crash leaves the lock; the resume takes it over, naming the dead holder
start_long crashed
crashed=$long
kill -KILL $crashed
wait $crashed 2>/dev/null
grep -q "^pid=$crashed\$" "$lock" || fail "no lock of the crashed run: $(cat "$lock" 2>&1)"
expect 0 "warning: snapshot directory '$snaps': taking over the lock of a run that is gone (pipenet pid $crashed on host $host, started .*): no process $crashed runs on this host" \
    train --steps 5 --snapshot-dir "$snaps" --resume auto
grep -q "resuming from $snaps/snapshot-" "$tmp/out" || fail "no resume: $(cat "$tmp/out")"
[ ! -e "$lock" ] || fail "the lock outlived the resumed run"

# write_lock HOST PID PROCESS_START JOB RESTARTS: a lock file as another run makes it
write_lock() {
    printf 'host=%s\npid=%s\nstarted=%s\nboot_id=%s\nprocess_start=%s\npid_namespace=%s\njob=%s\nrestarts=%s\nend\n' \
        "$1" "$2" "$(date +%s)" "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" "$3" \
        "$(readlink /proc/self/ns/pid 2>/dev/null)" "$4" "$5" >"$lock"
}
# a live pid of this host whose start time is not the lock's: the pid was reused
write_lock "$host" $$ 12345 "" 0
expect 0 "taking over the lock of a run that is gone (pipenet pid $$ on host $host, .*): pid $$ is now another process" \
    train --steps 5 --snapshot-dir "$snaps"
# that same live process, named as it is: a run that holds the directory
write_lock "$host" $$ "$(cut -d')' -f2 /proc/$$/stat | awk '{ print $20 }')" "" 0
expect 1 "is in use by another run: pipenet pid $$ on host $host" train --steps 5 --snapshot-dir "$snaps"
# a holder that has exited but is not reaped: its parent (exec'd into sleep) never waits
sh -c 'sleep 0.1 & echo $! >"$1"; exec sleep 30' sh "$tmp/zombie" &
parent=$!
sleep 1
zombie=$(cat "$tmp/zombie")
grep -q ') Z ' "/proc/$zombie/stat" || fail "no zombie to test with: $(cat "/proc/$zombie/stat" 2>&1)"
write_lock "$host" "$zombie" "$(cut -d')' -f2 "/proc/$zombie/stat" | awk '{ print $20 }')" "" 0
expect 0 "taking over the lock of a run that is gone (pipenet pid $zombie on host $host, .*): process $zombie has exited (not yet reaped)" \
    train --steps 5 --snapshot-dir "$snaps"
kill $parent 2>/dev/null
echo "ok: a crashed run's lock, a reused pid's and an unreaped holder's are taken over, naming them; a live holder is not"

# 4. another host: only the same batch job, started again, takes its lock over
write_lock node-elsewhere 4242 777 "" 0
expect 1 "in use by another run: pipenet pid 4242 on host node-elsewhere, started .*pipenet cannot see from host $host whether a process of another host lives: if that run is gone, delete $lock" \
    train --steps 5 --snapshot-dir "$snaps"
write_lock node-elsewhere 4242 777 slurm:901 0
expect 1 "pipenet pid 4242 on host node-elsewhere, started .*, Slurm job 901 (restart 0)" \
    env SLURM_JOB_ID=901 SLURM_RESTART_COUNT=0 "$PIPENET" train "$tmp/gpt.json" \
    --data "$tmp/lm/train.h5" --threads 1 --steps 5 --snapshot-dir "$snaps"
expect 0 "taking over the lock of a run that is gone (pipenet pid 4242 on host node-elsewhere, .*, Slurm job 901 (restart 0)): Slurm job 901 has been requeued since (restart 1, the lock's 0)" \
    env SLURM_JOB_ID=901 SLURM_RESTART_COUNT=1 "$PIPENET" train "$tmp/gpt.json" \
    --data "$tmp/lm/train.h5" --threads 1 --steps 5 --snapshot-dir "$snaps" --resume auto
write_lock node-elsewhere 4242 777 pbs:77.server 0
expect 0 "taking over the lock of a run that is gone (.*PBS job 77.server): PBS job 77.server runs again" \
    env PBS_JOBID=77.server "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" \
    --threads 1 --steps 5 --snapshot-dir "$snaps" --resume auto
echo "not a lock" >"$lock"
expect 1 "snapshot directory '$snaps' has a lock file, $lock, that does not say which run holds it" \
    train --steps 5 --snapshot-dir "$snaps"
echo "ok: another host's lock is refused, but for a requeued Slurm job and a rerun PBS job"
echo "PASS: snapshot lock"

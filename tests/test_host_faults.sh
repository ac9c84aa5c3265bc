#!/bin/sh
# Faults across hosts, on the test bed of tests/hosts_fixture.sh (ranks on 2 hosts x 2
# slots, a tiny GPT, 2 replicas x 2 stages: replica 0 on pn-host0, replica 1 on
# pn-host1; mpirun on pn-host0, as a batch script's on its first node, but in f on a
# third host, pn-host2, that runs no rank):
#  d. a link throttled (tc tbf) to host 1 slows training and changes nothing: the same
#     --deterministic hash as 1 process; the slowdown is printed;
#  a. host 1's link cut mid-run (down, as a pulled cable; in step 12, with rank 0
#     stopped for the cut, then let go on): with --stall-timeout 5 every
#     rank on both hosts ends (the promise: within 5 + 10 s; checked within 5 + 20,
#     for a loaded machine; orted and mpirun within 5 + 30 s), with one error line
#     that names ranks 2 and 3 and their host pn-host1;
#  c. the last snapshot before the cut is intact: the job resumes from it on the
#     surviving host alone (1 replica x 2 stages on pn-host0's 2 ranks) and on 1
#     process, both to the hash of an uninterrupted run;
#  b. every process of host 1 killed (a node that dies): every rank ends within the
#     same bound and nothing is left behind; Open MPI's message is printed (it ends
#     the job before the watchdog does, so the message is its own, not pipenet's);
#  e. every process of rank 0's host killed (in step 12, where rank 0 stops itself
#     for the kill: PIPENET_FAULT), mpirun's with them: pn-host1's ranks
#     end within the same bound (their orted ends them: it lost mpirun); what mpirun
#     printed is printed (nothing: it went with its host). The newest snapshot
#     verifies (pipenet inspect from pn-host1); the job started again on pn-host1
#     alone is refused, the lock naming pn-host0 and telling to delete it if that
#     run is gone; once deleted (the operator's part), it resumes to the hash;
#  f. rank 0's host's link cut in step 12 (rank 0 stopped for the cut, then let go
#     on), mpirun on pn-host2: every rank ends within the bound, mpirun within its
#     own, and rank 2 or 3 reports one line naming ranks 0 and 1 and their host
#     pn-host0; the newest snapshot verifies.
# (A cut just after a snapshot's rename can find a rank still in the snapshot's last
# exchange, a wait that is not watched and answers no census: in f, rank 3 was named
# too, once in 9 runs; that is why the faults come in a step.)
# (With mpirun on rank 0's host, a cut of that host's link is a's: with 2 hosts the
# same event, the report made where mpirun is.)
# pipenet ends every rank; mpirun and orted end with the hosts' TCP retransmission
# limit lowered (below): with the default they wait on the cut link ~15 min
# (docs/running.md, "What happens when a node is lost").
# Skips (77) where the namespaces cannot be made (not root, no ip); tc is needed.
set -u
. "$(dirname "$0")/script_fixture.sh"
. "$(dirname "$0")/lm_fixture.sh"
. "$(dirname "$0")/hosts_fixture.sh"
command -v tc >/dev/null 2>&1 || { echo "SKIP: no tc"; exit 77; }
hosts_up 3 2
# ranks on pn-host0 and pn-host1 only: pn-host2 is where mpirun runs in f (a login
# node, say), and a host of no ranks otherwise
head -n 2 "$hostfile" >"$hosts_dir/ranks" && hostfile=$hosts_dir/ranks

import_times_table 600
tiny_gpt 256 '{"batch": 16, "steps": 30, "seed": 3, "optimizer": {"type": "adam", "lr": 0.01}}' \
    >"$tmp/gpt.json"
snaps=$tmp/snaps
stall=5
# the promise is stall + 10 s (measured 12 s, docs/running.md); a loaded machine
# gets 10 s more here: speed belongs in bench/, this checks that every rank ends
bound=$((stall + 20))
# After the watchdog's abort, mpirun's order to end the job waits unacknowledged on
# its connection to the lost host's orted: only the kernel's retransmission limit
# ends that wait (net.ipv4.tcp_retries2: 15, ~15 min by default; 5, ~13 s), per
# network namespace, so set on both hosts as a site would on its nodes.
# (oob_tcp_keepalive would race the watchdog: keepalives stop once data is pending)
bound_mpirun=$((stall + 30))
for i in 0 1 2; do hosts_in $i sysctl -qw net.ipv4.tcp_retries2=5 || fail "tcp_retries2 on pn-host$i"; done

now() { date +%s.%N; }
since() { echo "$(now) $1" | awk '{ printf "%.1f", $1 - $2 }'; }
hash_of() { grep -o 'parameter hash after [0-9]* steps: [0-9a-f]*' "$tmp/$1.out" | cut -d' ' -f6; }
# start NAME NP [train options]: NP ranks over the hosts, in the background, training
# the GPT under --deterministic with 1 BLAS thread a rank; $tmp/NAME.out, and
# $tmp/NAME.end (when mpirun ended) and $tmp/NAME.rc once it has
start() {
    name=$1 np=$2; shift 2
    (hosts_mpirun -np "$np" "$PIPENET" train "$tmp/gpt.json" \
         --data "$tmp/lm/train.h5" --log-every 1000 --threads 1 --deterministic "$@" \
         >"$tmp/$name.out" 2>&1
     echo $? >"$tmp/$name.rc"; now >"$tmp/$name.end") &
    run=$!
}
# finish NAME: waits for the run of start NAME (not for the hosts' holders); its
# status in rc
finish() { wait "$run"; rc=$(cat "$tmp/$1.rc"); }
# ok NAME: the run exited 0 with the one-process hash
ok() {
    [ "$rc" -eq 0 ] || { cat "$tmp/$1.out"; fail "$1: exit $rc"; }
    [ "$(hash_of "$1")" = "$ref" ] || { cat "$tmp/$1.out"; fail "$1: hash '$(hash_of "$1")', 1 process $ref"; }
}
# every process of the hosts (their holders left out)
procs() { hosts_procs 0; hosts_procs 1; hosts_procs 2; }
# gone NAME T0: every rank (pipenet) on the hosts ends within $bound s of T0, then
# mpirun and the rest (orted) within $bound_mpirun s; sets ranks_s and took (s after T0)
gone() {
    while :; do
        ranks_s=$(since "$2")
        [ -z "$(for p in $(procs); do ps -o comm= -p "$p"; done | grep pipenet)" ] && break
        awk -v t="$ranks_s" -v b=$bound 'BEGIN { exit !(t > b) }' &&
            { cat "$tmp/$1.out"; fail "$1: ranks still run $ranks_s s after the fault"; }
        sleep 0.2
    done
    while [ ! -f "$tmp/$1.end" ] || [ -n "$(procs)" ]; do
        awk -v t="$(since "$2")" -v b=$bound_mpirun 'BEGIN { exit !(t > b) }' && {
            cat "$tmp/$1.out"
            for p in $(procs); do ps -o pid=,comm= -p "$p"; done
            fail "$1: processes left $bound_mpirun s after the fault"
        }
        sleep 0.2
    done
    took=$(awk -v t="$2" '{ printf "%.1f", $1 - t }' "$tmp/$1.end")
}
# wait_snapshot NAME STEP: until the run of start NAME has written the snapshot of
# STEP (it is renamed into place when complete)
wait_snapshot() {
    f=$snaps/snapshot-$(printf %010d "$2").h5
    for _ in $(seq 1 600); do
        [ -f "$f" ] && return 0
        [ -f "$tmp/$1.end" ] && { cat "$tmp/$1.out"; fail "$1: ended before the snapshot of step $2"; }
        sleep 0.1
    done
    cat "$tmp/$1.out"
    fail "$1: no snapshot of step $2 within 60 s"
}

# fault NAME CMD...: the 2 x 2 job as NAME (1000 steps, a snapshot every 10 in a new
# $snaps), CMD (the fault, at t) once the snapshot of step 10 is there, then gone;
# the job fails
fault() {
    name=$1; shift
    rm -rf "$snaps"
    start "$name" 4 --stages 2 --micro-batches 2 --steps 1000 --stall-timeout $stall \
        --snapshot-dir "$snaps" --snapshot-every 10
    wait_snapshot "$name" 10
    t=$(now)
    "$@"
    gone "$name" "$t"
    finish "$name"
    [ "$rc" -ne 0 ] || { cat "$tmp/$name.out"; fail "$name: exit 0"; }
}
# printed NAME: the first lines of the run's output that are not training's own
printed() {
    grep -v '^ *$' "$tmp/$1.out" | grep -v '^training\|^layout\|^snapshot at\|^epoch\|^---' |
        head -n 3 | tr '\n' ' '
}

# stopped I: p0, the pid of the process of host I that has stopped itself (rank 0, with
# PIPENET_FAULT=0:12:stop: in step 12, so that a fault then comes neither after a
# later snapshot than step 10's, however fast the steps, nor in the middle of one)
stopped() {
    for _ in $(seq 1 300); do
        for p in $(hosts_procs "$1"); do
            grep -q '^State:[[:space:]]*T' "/proc/$p/status" 2>/dev/null && { p0=$p; return; }
        done
        sleep 0.1
    done
    fail "no process of pn-host$1 stopped itself within 30 s"
}
# kill_stopped I: every process of host I killed once rank 0 there has stopped; the
# fault's time, t, is the kill's
kill_stopped() {
    stopped "$1"
    t=$(now)
    hosts_kill "$1"
}
# cut_stopped I J: host J's link cut once rank 0, on host I, has stopped, then rank 0
# let go on (SIGCONT); t is the cut's
cut_stopped() {
    stopped "$1"
    t=$(now)
    hosts_link_down "$2"
    kill -CONT "$p0"
}
# newest NAME: the newest snapshot in $snaps (into last), checked whole from pn-host1
# by pipenet inspect (it reads every array and verifies its checksum)
newest() {
    last=$(ls "$snaps" | grep '^snapshot-[0-9]*\.h5$' | tail -n 1)
    [ -n "$last" ] || fail "$1: no snapshot left in $snaps"
    hosts_in 1 "$PIPENET" inspect "$snaps/$last" >"$tmp/$1.inspect" 2>&1 ||
        { cat "$tmp/$1.inspect"; fail "$1: $last does not verify"; }
}

# the reference: one process, micro-batches of 4 samples, 30 steps
"$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --threads 1 --log-every 1000 \
    --deterministic --micro-batches 4 >"$tmp/one.out" 2>&1 || { cat "$tmp/one.out"; fail "1 process"; }
ref=$(hash_of one)
[ -n "$ref" ] || { cat "$tmp/one.out"; fail "no hash from 1 process"; }

# d: 2 x 2 as is, then with the traffic to host 1 at 2 Mbit/s
t=$(now); start plain 4 --stages 2 --micro-batches 2; finish plain; plain_s=$(since "$t")
ok plain
hosts_throttle 1 2mbit
t=$(now); start slow 4 --stages 2 --micro-batches 2; finish slow; slow_s=$(since "$t")
hosts_unthrottle 1
ok slow
awk -v a="$plain_s" -v b="$slow_s" 'BEGIN { exit !(b > a) }' ||
    fail "throttled: $slow_s s, not slower than $plain_s s"
echo "ok: 30 steps of 2 x 2 in $plain_s s, $slow_s s with host 1's link at 2 Mbit/s ($(echo "$slow_s $plain_s" | awk '{ printf "%.1f", $1 / $2 }') x); hash $ref both, as 1 process"

# a: host 1's link cut in step 12, after the snapshot of step 10
export PIPENET_FAULT=0:12:stop
fault cut cut_stopped 0 1
unset PIPENET_FAULT
[ "$(grep -c 'pipenet: error' "$tmp/cut.out")" -eq 1 ] ||
    { cat "$tmp/cut.out"; fail "cut: not one error line"; }
grep -q "^pipenet: error: rank [01] (stage [01], replica 0): .*no progress for $stall s (--stall-timeout) waiting for .*; no answer within 2 s (stopped, or busy outside MPI) from rank 2 (stage 0, replica 1) on host pn-host1, rank 3 (stage 1, replica 1) on host pn-host1$" "$tmp/cut.out" ||
    { cat "$tmp/cut.out"; fail "cut: the error does not name ranks 2 and 3 on pn-host1"; }
echo "ok: host 1's link cut: every rank ended $ranks_s s after the cut, mpirun $took s after (exit $rc): $(grep 'pipenet: error' "$tmp/cut.out")"

# c: the newest snapshot resumes on pn-host0 alone (a hostfile of the survivor), then
# on 1 process there (the lock is pn-host0's: another host would be refused)
newest cut
cp -r "$snaps" "$tmp/snaps1" # for 1 process, as the cut left it
grep "^pn-host0 " "$hostfile" >"$hosts_dir/survivor"
all=$hostfile hostfile=$hosts_dir/survivor
start survivor 2 --stages 2 --micro-batches 4 --snapshot-dir "$snaps" --resume auto
finish survivor
hostfile=$all
ok survivor
grep -q "resuming from $snaps/$last" "$tmp/survivor.out" ||
    { cat "$tmp/survivor.out"; fail "survivor: did not resume from $last"; }
hosts_in 0 "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --threads 1 --log-every 1000 \
    --deterministic --micro-batches 4 --snapshot-dir "$tmp/snaps1" --resume auto >"$tmp/one1.out" 2>&1
rc=$?
ok one1
grep -q "resuming from $tmp/snaps1/$last" "$tmp/one1.out" ||
    { cat "$tmp/one1.out"; fail "1 process: did not resume from $last"; }
echo "ok: $last resumed on pn-host0's 2 ranks (1 x 2) and on 1 process to $ref"

# b: every process of host 1 killed after the snapshot of step 10
hosts_link_up 1
fault killed hosts_kill 1
echo "ok: host 1's processes killed: every rank ended $ranks_s s after, mpirun $took s after (exit $rc): $(printed killed)"
# e: every process of rank 0's host killed after the snapshot of step 10 (in step 12):
# ranks 0 and 1, and mpirun, which runs there; host 1's orted finds its connection to
# mpirun closed and ends its ranks
export PIPENET_FAULT=0:12:stop
fault lost0 kill_stopped 0
unset PIPENET_FAULT
newest lost0
[ "$last" = snapshot-0000000010.h5 ] || fail "lost0: the newest snapshot is $last, not step 10's"
said=$(printed lost0)
echo "ok: rank 0's host (and mpirun) killed: every rank on pn-host1 ended $ranks_s s after; what mpirun printed before it went (the last lines; \"Killed\" is this script's shell): ${said:-nothing}; $last verifies"
# the job again on the survivor, pn-host1's 2 ranks (mpirun there): the lock names
# pn-host0, whose processes no host can see, so the run is refused, told to delete
# the lock if that run is gone; once deleted, it resumes from $last to the hash
grep -q '^host=pn-host0$' "$snaps/pipenet.lock" ||
    fail "lost0: the lock is not rank 0's on pn-host0: $(cat "$snaps/pipenet.lock" 2>&1)"
grep "^pn-host1 " "$hostfile" >"$hosts_dir/survivor"
all=$hostfile hostfile=$hosts_dir/survivor hosts_launch=1
start refused 2 --stages 2 --micro-batches 4 --snapshot-dir "$snaps" --resume auto
finish refused
[ "$rc" -ne 0 ] || { cat "$tmp/refused.out"; fail "refused: exit 0 over pn-host0's lock"; }
grep -q "in use by another run: pipenet pid [0-9]* on host pn-host0, .*pipenet cannot see from host pn-host1 whether a process of another host lives: if that run is gone, delete $snaps/pipenet.lock)" "$tmp/refused.out" ||
    { cat "$tmp/refused.out"; fail "refused: the error does not name pn-host0's lock and what to do"; }
rm "$snaps/pipenet.lock" # the operator's part: pn-host0 is down
start resumed0 2 --stages 2 --micro-batches 4 --snapshot-dir "$snaps" --resume auto
finish resumed0
hostfile=$all hosts_launch=0
ok resumed0
grep -q "resuming from $snaps/$last" "$tmp/resumed0.out" ||
    { cat "$tmp/resumed0.out"; fail "resumed0: did not resume from $last"; }
echo "ok: pn-host1 refused pn-host0's lock ($(grep -o 'pipenet cannot see[^)]*' "$tmp/refused.out" | head -n 1)); with it deleted, $last resumed on pn-host1's 2 ranks to $ref"

# f: rank 0's host cut off (link down) in step 12, mpirun on pn-host2 (where it
# runs, its output goes on): rank 2 on pn-host1 reports ranks 0 and 1 of pn-host0
hosts_launch=2
export PIPENET_FAULT=0:12:stop
fault cut0 cut_stopped 0 0
unset PIPENET_FAULT
hosts_launch=0
[ "$(grep -c 'pipenet: error' "$tmp/cut0.out")" -eq 1 ] ||
    { cat "$tmp/cut0.out"; fail "cut0: not one error line"; }
grep -q "^pipenet: error: rank [23] (stage [01], replica 1): .*no progress for $stall s (--stall-timeout) waiting for .*; no answer within 2 s (stopped, or busy outside MPI) from rank 0 (stage 0, replica 0) on host pn-host0, rank 1 (stage 1, replica 0) on host pn-host0$" "$tmp/cut0.out" ||
    { cat "$tmp/cut0.out"; fail "cut0: the error does not name ranks 0 and 1 on pn-host0"; }
newest cut0
echo "ok: rank 0's host's link cut (mpirun on pn-host2): every rank ended $ranks_s s after the cut, mpirun $took s after (exit $rc); $last verifies: $(grep 'pipenet: error' "$tmp/cut0.out")"
echo "PASS: host faults"

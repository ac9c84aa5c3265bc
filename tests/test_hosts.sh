#!/bin/sh
# pipenet across hosts, on the test bed of tests/hosts_fixture.sh (2 hosts, network
# and UTS namespaces of this machine, 2 slots each), with a tiny GPT:
#  a. Open MPI's own choice of transport, from its verbose output (the bml lines of
#     pml ob1: which BTL sends to which peer): every rank sends to the ranks of the
#     other host over tcp and to the other rank of its host over shared memory (vader);
#  b. 2 replicas x 2 stages over the 2 hosts train under --deterministic to the
#     parameter hash of one process, with micro-batches of the same size;
#  c. pipenet counts the ranks of a node per host (MPI_Comm_split_type): the BLAS
#     threads it gives each rank (cores / ranks on the rank's node, when neither
#     --threads nor $OPENBLAS_NUM_THREADS says) are the cores over 2 with 2 ranks on a
#     host, all the cores with 1 rank on each host;
#  d. snapshots are written by rank 0 on its host: a run whose rank 0 dies (SIGKILL)
#     after a snapshot leaves the snapshot and its lock naming host pn-host0; a
#     process on another host (this namespace) is refused the directory, naming
#     pn-host0, and the job on the hosts resumes (rank 0 on pn-host0 takes the lock
#     over) to the same hash;
#  e. tables sharded by rows over 2 replicas, one on each host (their rows over tcp),
#     train to the parameter hash of one process.
# Skips (77) where the namespaces cannot be made (not root, no ip).
set -u
. "$(dirname "$0")/script_fixture.sh"
. "$(dirname "$0")/lm_fixture.sh"
. "$(dirname "$0")/hosts_fixture.sh"
hosts_up 2 2

import_times_table 600
tiny_gpt 256 '{"batch": 16, "steps": 10, "seed": 3, "optimizer": {"type": "adam", "lr": 0.01}}' \
    >"$tmp/gpt.json"
snaps=$tmp/snaps
cores=$(getconf _NPROCESSORS_ONLN) # what pipenet divides (sysconf), not nproc's affinity

# on_hosts NAME NP [mpirun options] -- [train options]: NP ranks over the hosts train
# the GPT 10 steps under --deterministic with the BLAS threads left to pipenet (no
# $OPENBLAS_NUM_THREADS, which the test harness sets and mpirun would pass on);
# output in $tmp/NAME.out, status in rc
on_hosts() {
    name=$1 np=$2; shift 2
    mpi=
    while [ $# -gt 0 ] && [ "$1" != -- ]; do mpi="$mpi $1"; shift; done
    [ $# -gt 0 ] && shift
    (unset OPENBLAS_NUM_THREADS
     # $mpi: options without spaces, split on purpose
     hosts_mpirun -np "$np" $mpi "$PIPENET" train "$tmp/gpt.json" \
         --data "$tmp/lm/train.h5" --log-every 1000 --deterministic "$@") >"$tmp/$name.out" 2>&1
    rc=$?
}
hash_of() { grep -o 'parameter hash after 10 steps: [0-9a-f]*' "$tmp/$1.out" | cut -d' ' -f6; }
# ok NAME: the run exited 0 with the one-process hash
ok() {
    [ "$rc" -eq 0 ] || { cat "$tmp/$1.out"; fail "$1: exit $rc"; }
    [ "$(hash_of "$1")" = "$ref" ] || { cat "$tmp/$1.out"; fail "$1: hash '$(hash_of "$1")', 1 process $ref"; }
}
# threads NAME N: rank 0 of the run gave each rank N BLAS threads
threads() {
    grep -q "^training .*, $2 BLAS thread(s) per rank" "$tmp/$1.out" ||
        fail "$1: not $2 BLAS thread(s) per rank: $(grep '^training' "$tmp/$1.out")"
}
per() { [ $(($1 / $2)) -gt 0 ] && echo $(($1 / $2)) || echo 1; }

# the reference: one process, in this namespace, micro-batches of 4 samples
"$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --threads 1 --log-every 1000 \
    --deterministic --micro-batches 4 >"$tmp/one.out" 2>&1 || { cat "$tmp/one.out"; fail "1 process"; }
ref=$(hash_of one)
[ -n "$ref" ] || { cat "$tmp/one.out"; fail "no hash from 1 process"; }

# a, b, c: 2 x 2 over the hosts (the default mapping fills pn-host0's 2 slots with
# ranks 0 and 1: replica 0 on pn-host0, replica 1 on pn-host1)
on_hosts x2 4 --mca btl_base_verbose 100 -- --stages 2 --micro-batches 2
ok x2
grep -q '^layout: 2 replica(s) x 2 stage(s), 2 micro-batches of 4' "$tmp/x2.out" ||
    fail "x2: not 2 x 2: $(grep '^layout' "$tmp/x2.out")"
# "[pn-host1:PID] mca: bml: Using tcp btl for send to [[JOB,1],0] on node pn-host0":
# the sender's host, the BTL, the peer's host; 4 ranks x 4 peers (itself included)
grep 'mca: bml: Using [a-z]* btl for send to' "$tmp/x2.out" >"$tmp/bml"
awk '{ from = $1; sub(/^\[/, "", from); sub(/:.*/, "", from); btl = $5; to = $NF
       same = from == to
       if (same && btl != "vader" && btl != "sm" && btl != "self" || !same && btl != "tcp") {
           print "wrong BTL: " $0; bad = 1 }
       n[same ? btl : "tcp across"]++ }
     END { printf "%d sends: %d tcp across hosts, %d vader within, %d self\n", NR,
           n["tcp across"], n["vader"] + n["sm"], n["self"]
           exit bad || NR != 16 || n["tcp across"] != 8 || n["vader"] + n["sm"] != 4 }' \
    "$tmp/bml" >"$tmp/btl" || { cat "$tmp/bml"; fail "BTLs: $(cat "$tmp/btl")"; }
threads x2 "$(per "$cores" 2)"
echo "ok: 2 x 2 over 2 hosts: $(cat "$tmp/btl"); hash $ref as 1 process; $(per "$cores" 2) BLAS thread(s) per rank with 2 ranks a host"

# c: one rank on each host: all the cores for each; both on pn-host0: half each
on_hosts spread 2 --map-by node -- --stages 2 --micro-batches 4
ok spread
threads spread "$cores"
on_hosts packed 2 -- --stages 2 --micro-batches 4
ok packed
threads packed "$(per "$cores" 2)"
echo "ok: BLAS threads per rank on $cores cores: $cores with 1 rank a host, $(per "$cores" 2) with 2 on one host"

# d: rank 0 dies after the snapshot of step 4 (mpirun then ends the job)
export PIPENET_FAULT=0:6:kill
on_hosts killed 4 -- --stages 2 --micro-batches 2 --snapshot-dir "$snaps" --snapshot-every 4
unset PIPENET_FAULT
[ "$rc" -ne 0 ] || { cat "$tmp/killed.out"; fail "killed: exit 0"; }
[ -f "$snaps/snapshot-0000000004.h5" ] || { cat "$tmp/killed.out"; fail "no snapshot of step 4: $(ls "$snaps")"; }
grep -q '^host=pn-host0$' "$snaps/pipenet.lock" ||
    fail "the lock is not rank 0's on pn-host0: $(cat "$snaps/pipenet.lock" 2>&1)"
expect 1 "in use by another run: pipenet pid [0-9]* on host pn-host0, .*cannot see from host $(hostname) whether" \
    "$PIPENET" train "$tmp/gpt.json" --data "$tmp/lm/train.h5" --threads 1 --deterministic \
    --snapshot-dir "$snaps" --resume auto
on_hosts resumed 4 -- --stages 2 --micro-batches 2 --snapshot-dir "$snaps" --resume auto
ok resumed
grep -q "taking over the lock of a run that is gone (pipenet pid [0-9]* on host pn-host0" "$tmp/resumed.out" &&
    grep -q "resuming from $snaps/snapshot-0000000004.h5" "$tmp/resumed.out" ||
    { cat "$tmp/resumed.out"; fail "resumed: no take-over of pn-host0's lock, or no resume from step 4"; }
echo "ok: rank 0 on pn-host0 wrote the snapshot and the lock; another host is refused; resumed over the hosts to $ref"
# e: tables sharded by rows over 2 replicas, one on each host: the pulls (ahead of
# their forwards, pipeline/stage_ahead.c) and pushes cross the hosts over tcp, and
# train to one process's hash (micro-batches of 8 samples in both)
fixtures=$(cd "$(dirname "$0")" && pwd)
mkdir "$tmp/shard" && (tmp=$tmp/shard && . "$fixtures/shard_fixture.sh") ||
    fail "the sharded model and data"
# sharded NAME MODEL MICRO [launcher...]: 30 --deterministic steps; NAME's hash in $tmp/NAME.hash
sharded() {
    name=$1 model=$2 micro=$3; shift 3
    (unset OPENBLAS_NUM_THREADS
     "$@" "$PIPENET" train "$tmp/shard/$model" --data "$tmp/shard/ctr/train.h5" --eval= \
         --steps 30 --micro-batches "$micro" --threads 1 --log-every 1000 --deterministic \
         --snapshot-dir "") >"$tmp/$name.out" 2>&1 ||
        { rc=$?; cat "$tmp/$name.out"; fail "$name: exit $rc"; }
    grep -o 'parameter hash after 30 steps: [0-9a-f]*' "$tmp/$name.out" >"$tmp/$name.hash" ||
        { cat "$tmp/$name.out"; fail "$name: no hash"; }
}
sharded shard_one whole1.json 8 env
sharded shard_hosts shard1.json 4 hosts_mpirun -np 2 --map-by node
grep -q '^layout: 2 replica(s) x 1 stage(s), 4 micro-batches of 8' "$tmp/shard_hosts.out" ||
    fail "shard_hosts: $(grep '^layout' "$tmp/shard_hosts.out")"
[ "$(cat "$tmp/shard_hosts.hash")" = "$(cat "$tmp/shard_one.hash")" ] ||
    fail "sharded over 2 hosts: $(cat "$tmp/shard_hosts.hash"), 1 process $(cat "$tmp/shard_one.hash")"
echo "ok: a table sharded over 2 hosts (pulls ahead over tcp): $(cat "$tmp/shard_one.hash") as 1 process"
echo "PASS: hosts"
